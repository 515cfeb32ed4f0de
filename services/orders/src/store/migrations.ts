import {
  IDEMPOTENCY_PRINCIPAL_SQL,
  IDEMPOTENCY_TABLE_SQL,
  OUTBOX_TABLE_SQL,
  type Migration,
} from "@switchyard/platform/store";

// Never edit a migration that has shipped: add the next version.
export const ordersMigrations: Migration[] = [
  {
    version: 1,
    name: "orders, items, discounts, shipments, idempotency keys",
    sql: `
CREATE TABLE orders (
  id         bigserial PRIMARY KEY,
  tenant_id  text NOT NULL,
  user_id    bigint NOT NULL,
  status     text NOT NULL CHECK (status IN ('pending', 'paid', 'shipped', 'cancelled')),
  currency   text NOT NULL,
  note       text NOT NULL DEFAULT '',
  payment_id text NOT NULL DEFAULT '',
  refund_id  text NOT NULL DEFAULT '',
  version    integer NOT NULL DEFAULT 1,
  created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp()),
  updated_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp())
);
CREATE INDEX orders_by_user ON orders (tenant_id, user_id, created_at DESC, id DESC);
CREATE TABLE order_items (
  id         bigserial PRIMARY KEY,
  order_id   bigint NOT NULL REFERENCES orders (id),
  sku        text NOT NULL,
  quantity   bigint NOT NULL CHECK (quantity > 0),
  unit_price bigint NOT NULL CHECK (unit_price >= 0),
  created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp())
);
CREATE INDEX order_items_by_order ON order_items (order_id, id);
CREATE TABLE order_discounts (
  id         bigserial PRIMARY KEY,
  order_id   bigint NOT NULL REFERENCES orders (id),
  code       text NOT NULL,
  amount     bigint NOT NULL CHECK (amount > 0),
  created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp())
);
CREATE INDEX order_discounts_by_order ON order_discounts (order_id, id);
CREATE TABLE shipments (
  id              text PRIMARY KEY,
  order_id        bigint NOT NULL REFERENCES orders (id),
  carrier         text NOT NULL DEFAULT '',
  tracking_number text NOT NULL DEFAULT '',
  created_at      timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp())
);
CREATE INDEX shipments_by_order ON shipments (order_id, created_at);
${IDEMPOTENCY_TABLE_SQL}`,
  },
  {
    version: 2,
    name: "money steps of orders (intent, outcome), reconciler lease",
    sql: `
CREATE TABLE order_steps (
  id              bigserial PRIMARY KEY,
  order_id        bigint NOT NULL REFERENCES orders (id),
  tenant_id       text NOT NULL,
  kind            text NOT NULL CHECK (kind IN ('charge', 'refund')),
  attempt         integer NOT NULL CHECK (attempt > 0),
  amount          bigint NOT NULL CHECK (amount > 0),
  currency        text NOT NULL,
  idempotency_key text NOT NULL,
  payment_id      text NOT NULL DEFAULT '',
  refund_id       text NOT NULL DEFAULT '',
  state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'succeeded', 'failed')),
  outcome         text NOT NULL DEFAULT '',
  deadline_at     timestamptz NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
  settled_at      timestamptz,
  UNIQUE (order_id, kind, attempt)
);
-- At most one unsettled step per order, whatever the code does.
CREATE UNIQUE INDEX order_steps_one_unsettled ON order_steps (order_id) WHERE state = 'pending';
CREATE INDEX order_steps_due ON order_steps (deadline_at) WHERE state = 'pending';
CREATE TABLE leases (
  name       text PRIMARY KEY,
  holder     text NOT NULL,
  expires_at timestamptz NOT NULL
);`,
  },
  {
    version: 3,
    name: "announce every new order and status change (NOTIFY), for TrackOrders on every replica",
    // A trigger, so no change of status, by any path, commits unannounced; the announcement is sent
    // when (and only if) the transaction commits.
    sql: `
CREATE FUNCTION announce_order_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM NEW.status THEN
    PERFORM pg_notify(TG_TABLE_SCHEMA || '_order_status', json_build_object(
      't', NEW.tenant_id, 'i', NEW.id::text, 's', NEW.status, 'u', (extract(epoch FROM NEW.updated_at) * 1000)::bigint)::text);
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER orders_status_announced AFTER INSERT OR UPDATE OF status ON orders
  FOR EACH ROW EXECUTE FUNCTION announce_order_status();`,
  },
  {
    version: 4,
    name: "idempotency keys scoped by principal",
    sql: IDEMPOTENCY_PRINCIPAL_SQL,
  },
  {
    version: 5,
    name: "outbox of events for partners (order.paid, order.shipped, order.cancelled)",
    sql: OUTBOX_TABLE_SQL,
  },
];
