# Sourced once by the postgres image's entrypoint, as the superuser, when the data directory is new:
# one role and schema per service (deploy/postgres/roles.sql, the script a managed server gets), with
# the passwords of the Secret switchyard-postgres. The URLs in switchyard-database name the same ones.
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v identity_password="$IDENTITY_DB_PASSWORD" -v payments_password="$PAYMENTS_DB_PASSWORD" \
  -v orders_password="$ORDERS_DB_PASSWORD" -v content_password="$CONTENT_DB_PASSWORD" \
  -v webhooks_password="$WEBHOOKS_DB_PASSWORD" \
  -f /etc/switchyard/postgres/roles.sql
