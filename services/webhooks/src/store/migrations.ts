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
  {
    version: 2,
    name: "events, their deliveries to endpoints, and each delivery's attempts",
    sql: `
CREATE TABLE events (
  id          text PRIMARY KEY,
  tenant_id   text NOT NULL,
  type        text NOT NULL,
  body        text NOT NULL,
  occurred_at timestamptz NOT NULL,
  recorded_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp())
);
CREATE TABLE deliveries (
  id               text PRIMARY KEY,
  tenant_id        text NOT NULL,
  endpoint_id      text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
  event_id         text NOT NULL REFERENCES events (id),
  status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
  first_attempt_at timestamptz,
  last_attempt_at  timestamptz,
  lease_holder     text,
  lease_expires_at timestamptz,
  created_at       timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp()),
  UNIQUE (endpoint_id, event_id)
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX deliveries_by_endpoint ON deliveries (endpoint_id, created_at DESC, id DESC);
CREATE TABLE delivery_attempts (
  id           bigserial PRIMARY KEY,
  delivery_id  text NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
  attempted_at timestamptz NOT NULL,
  status       integer,
  latency_ms   integer NOT NULL,
  excerpt      text NOT NULL DEFAULT '',
  error        text NOT NULL DEFAULT ''
);
CREATE INDEX delivery_attempts_by_delivery ON delivery_attempts (delivery_id, id);`,
  },
  {
    version: 3,
    name: "indexes a claim reads: each endpoint's pending deliveries in order, the leases in flight",
    sql: `
CREATE INDEX deliveries_pending_by_endpoint ON deliveries (endpoint_id, next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX deliveries_leased ON deliveries (lease_expires_at) WHERE status = 'pending';`,
  },
];
