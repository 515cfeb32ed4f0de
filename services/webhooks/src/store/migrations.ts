import { IDEMPOTENCY_PRINCIPAL_SQL, IDEMPOTENCY_TABLE_SQL, type Migration } from "@switchyard/platform/store";

// Never edit a migration that has shipped: add the next version.
export const webhooksMigrations: Migration[] = [
  {
    version: 1,
    name: "endpoints (secrets sealed), idempotency keys",
    sql: `
CREATE TABLE endpoints (
  id                         text PRIMARY KEY,
  tenant_id                  text NOT NULL,
  url                        text NOT NULL,
  event_types                text[] NOT NULL,
  enabled                    boolean NOT NULL DEFAULT true,
  disabled_reason            text NOT NULL DEFAULT '',
  secret                     text NOT NULL,
  previous_secret            text,
  previous_secret_expires_at timestamptz,
  created_at                 timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp()),
  updated_at                 timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp())
);
CREATE INDEX endpoints_by_created ON endpoints (tenant_id, created_at DESC, id DESC);
${IDEMPOTENCY_TABLE_SQL}
${IDEMPOTENCY_PRINCIPAL_SQL}`,
  },
];
