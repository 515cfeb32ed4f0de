-- One PostgreSQL role per service, each reaching only its own schema (run once per database, and
-- again whenever a password changes; it is safe to run twice). As a role that may create roles:
--
--   psql "$ADMIN_URL" -v ON_ERROR_STOP=1 \
--     -v identity_password="$(openssl rand -base64 24)" -v payments_password="…" \
--     -v orders_password="…" -v content_password="…" -v webhooks_password="…" \
--     -f deploy/postgres/roles.sql
--
-- Each service's DATABASE_URL then names its own role (postgres://switchyard_identity:…@host/db).
-- Role and schema names can be changed with -v <service>_role=… / -v <service>_schema=… (the
-- schemas must match the services' <SERVICE>_DB_SCHEMA settings). Nobody but a schema's own role can
-- use it; nobody can create anything in the public schema.

\if :{?identity_role} \else \set identity_role switchyard_identity \endif
\if :{?payments_role} \else \set payments_role switchyard_payments \endif
\if :{?orders_role} \else \set orders_role switchyard_orders \endif
\if :{?content_role} \else \set content_role switchyard_content \endif
\if :{?webhooks_role} \else \set webhooks_role switchyard_webhooks \endif
\if :{?identity_schema} \else \set identity_schema identity \endif
\if :{?payments_schema} \else \set payments_schema payments \endif
\if :{?orders_schema} \else \set orders_schema orders \endif
\if :{?content_schema} \else \set content_schema content \endif
\if :{?webhooks_schema} \else \set webhooks_schema webhooks \endif

SELECT current_database() AS db \gset

REVOKE CREATE ON SCHEMA public FROM PUBLIC;

-- identity
SELECT format('CREATE ROLE %I LOGIN', :'identity_role') WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'identity_role') \gexec
ALTER ROLE :"identity_role" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'identity_password';
GRANT CONNECT ON DATABASE :"db" TO :"identity_role";
CREATE SCHEMA IF NOT EXISTS :"identity_schema" AUTHORIZATION :"identity_role";
ALTER SCHEMA :"identity_schema" OWNER TO :"identity_role";
REVOKE ALL ON SCHEMA :"identity_schema" FROM PUBLIC;

-- payments
SELECT format('CREATE ROLE %I LOGIN', :'payments_role') WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'payments_role') \gexec
ALTER ROLE :"payments_role" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'payments_password';
GRANT CONNECT ON DATABASE :"db" TO :"payments_role";
CREATE SCHEMA IF NOT EXISTS :"payments_schema" AUTHORIZATION :"payments_role";
ALTER SCHEMA :"payments_schema" OWNER TO :"payments_role";
REVOKE ALL ON SCHEMA :"payments_schema" FROM PUBLIC;

-- orders
SELECT format('CREATE ROLE %I LOGIN', :'orders_role') WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'orders_role') \gexec
ALTER ROLE :"orders_role" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'orders_password';
GRANT CONNECT ON DATABASE :"db" TO :"orders_role";
CREATE SCHEMA IF NOT EXISTS :"orders_schema" AUTHORIZATION :"orders_role";
ALTER SCHEMA :"orders_schema" OWNER TO :"orders_role";
REVOKE ALL ON SCHEMA :"orders_schema" FROM PUBLIC;

-- content
SELECT format('CREATE ROLE %I LOGIN', :'content_role') WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'content_role') \gexec
ALTER ROLE :"content_role" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'content_password';
GRANT CONNECT ON DATABASE :"db" TO :"content_role";
CREATE SCHEMA IF NOT EXISTS :"content_schema" AUTHORIZATION :"content_role";
ALTER SCHEMA :"content_schema" OWNER TO :"content_role";
REVOKE ALL ON SCHEMA :"content_schema" FROM PUBLIC;

-- webhooks
SELECT format('CREATE ROLE %I LOGIN', :'webhooks_role') WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'webhooks_role') \gexec
ALTER ROLE :"webhooks_role" WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'webhooks_password';
GRANT CONNECT ON DATABASE :"db" TO :"webhooks_role";
CREATE SCHEMA IF NOT EXISTS :"webhooks_schema" AUTHORIZATION :"webhooks_role";
ALTER SCHEMA :"webhooks_schema" OWNER TO :"webhooks_role";
REVOKE ALL ON SCHEMA :"webhooks_schema" FROM PUBLIC;
