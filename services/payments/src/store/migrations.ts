import {
  IDEMPOTENCY_PRINCIPAL_SQL,
  IDEMPOTENCY_TABLE_SQL,
  LEASES_TABLE_SQL,
  OUTBOX_TABLE_SQL,
  type Migration,
} from "@switchyard/platform/store";

// Never edit a migration that has shipped: add the next version.
export const paymentsMigrations: Migration[] = [
  {
    version: 1,
    name: "payments, refunds, idempotency keys",
    sql: `
CREATE TABLE payments (
  id              text PRIMARY KEY,
  tenant_id       text NOT NULL,
  amount          bigint NOT NULL CHECK (amount > 0),
  currency        text NOT NULL,
  source          text NOT NULL,
  amount_refunded bigint NOT NULL DEFAULT 0 CHECK (amount_refunded >= 0 AND amount_refunded <= amount),
  created_at      timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp())
);
CREATE INDEX payments_by_created ON payments (tenant_id, created_at DESC, id DESC);
CREATE TABLE refunds (
  id         text PRIMARY KEY,
  tenant_id  text NOT NULL,
  payment_id text NOT NULL REFERENCES payments (id),
  amount     bigint NOT NULL CHECK (amount > 0),
  currency   text NOT NULL,
  reason     text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp())
);
CREATE INDEX refunds_by_created ON refunds (payment_id, created_at DESC, id DESC);
${IDEMPOTENCY_TABLE_SQL}`,
  },
  {
    version: 2,
    name: "payment owner and reference",
    // Payments made before owners existed belong to nobody (0): only the tenant's admins see them.
    sql: `
ALTER TABLE payments ADD COLUMN owner_user_id bigint NOT NULL DEFAULT 0;
ALTER TABLE payments ADD COLUMN reference text NOT NULL DEFAULT '';
CREATE INDEX payments_by_owner ON payments (tenant_id, owner_user_id, created_at DESC, id DESC);`,
  },
  {
    version: 3,
    name: "idempotency keys scoped by principal",
    sql: IDEMPOTENCY_PRINCIPAL_SQL,
  },
  {
    version: 4,
    name: "outbox of events for partners (payment.succeeded, refund.succeeded)",
    sql: OUTBOX_TABLE_SQL,
  },
  {
    version: 5,
    name: "leases (one replica relays the outbox at a time)",
    sql: LEASES_TABLE_SQL,
  },
];
