// OrdersStore on the PostgreSQL-family adapter. Every change of an order happens under its row
// lock, after a check of the locked order; a money step's intent commits with the check that
// allowed it, and its outcome with the status change it brings.
import { DomainError } from "@switchyard/platform/domain-error.js";
import {
  appendEvent,
  findIdempotentResult,
  jsonResultCodec,
  KeysetPageQuery,
  releaseLease,
  runIdempotent,
  takeLease,
  type KeyedRequest,
  type SqlDatabase,
  type SqlExecutor,
} from "@switchyard/platform/store";
import { newId } from "@switchyard/platform/ids.js";
import type { Keyset } from "@switchyard/platform/paging.js";
import type { CallScope } from "@switchyard/platform/call-deadline.js";
import type { NewItem } from "../domain/orders.js";
import type { OrderStatus } from "../domain/state-machine.js";
import type { StepKind, StepState } from "../domain/steps.js";
import { statusEventOf } from "../partner-events.js";
import type {
  ChangeGuard,
  DiscountRecord,
  ItemRecord,
  OrderAction,
  OrderRecord,
  OrdersStore,
  OrderStatusChange,
  ShipmentRecord,
  StepOutcome,
  StepRecord,
} from "./port.js";

interface OrderRow {
  id: bigint;
  tenant_id: string;
  user_id: bigint;
  status: OrderStatus;
  currency: string;
  note: string;
  payment_id: string;
  refund_id: string;
  version: number;
  step_in_progress: StepKind | null;
  created_at: Date;
  updated_at: Date;
}

interface StepRow {
  id: bigint;
  order_id: bigint;
  tenant_id: string;
  kind: StepKind;
  attempt: number;
  amount: bigint;
  currency: string;
  idempotency_key: string;
  payment_id: string;
  refund_id: string;
  state: StepState;
  outcome: string;
  deadline_at: Date;
  created_at: Date;
  settled_at: Date | null;
}

const ORDER_COLUMNS = `id, tenant_id, user_id, status, currency, note, payment_id, refund_id, version, created_at, updated_at,
  (SELECT s.kind FROM order_steps s WHERE s.order_id = orders.id AND s.state = 'pending') AS step_in_progress`;
const STEP_COLUMNS =
  "id, order_id, tenant_id, kind, attempt, amount, currency, idempotency_key, payment_id, refund_id, state, outcome, deadline_at, created_at, settled_at";
const NOW = "date_trunc('milliseconds', clock_timestamp())";
const CREATE_ORDER = "orders.create";
const orderCodec = jsonResultCodec<OrderRecord>();
const USER_ORDERS_PAGE = new KeysetPageQuery({
  select: `SELECT ${ORDER_COLUMNS} FROM orders`,
  where: "tenant_id = $1 AND user_id = $2",
  order: "newest first",
});

const toItem = (r: {
  id: bigint;
  sku: string;
  quantity: bigint;
  unit_price: bigint;
  created_at: Date;
}): ItemRecord => ({ id: r.id, sku: r.sku, quantity: r.quantity, unitPrice: r.unit_price, createdAt: r.created_at });
const toDiscount = (r: { id: bigint; code: string; amount: bigint; created_at: Date }): DiscountRecord => ({
  id: r.id,
  code: r.code,
  amount: r.amount,
  createdAt: r.created_at,
});
const toShipment = (r: {
  id: string;
  order_id: bigint;
  carrier: string;
  tracking_number: string;
  created_at: Date;
}): ShipmentRecord => ({
  id: r.id,
  orderId: r.order_id,
  carrier: r.carrier,
  trackingNumber: r.tracking_number,
  createdAt: r.created_at,
});
const toStep = (r: StepRow): StepRecord => ({
  id: r.id,
  orderId: r.order_id,
  tenantId: r.tenant_id,
  kind: r.kind,
  attempt: Number(r.attempt),
  amount: r.amount,
  currency: r.currency,
  idempotencyKey: r.idempotency_key,
  paymentId: r.payment_id,
  refundId: r.refund_id,
  state: r.state,
  outcome: r.outcome,
  deadlineAt: r.deadline_at,
  createdAt: r.created_at,
  settledAt: r.settled_at ?? undefined,
});

/** Orders with their items, discounts and shipments: four queries for any number of orders. */
async function aggregates(db: SqlExecutor, rows: OrderRow[]): Promise<OrderRecord[]> {
  if (rows.length === 0) return [];
  const ids = rows.map((r) => r.id.toString());
  // One after another: a transaction's client runs one statement at a time.
  const items = await db.query<{
    order_id: bigint;
    id: bigint;
    sku: string;
    quantity: bigint;
    unit_price: bigint;
    created_at: Date;
  }>(
    `SELECT order_id, id, sku, quantity, unit_price, created_at FROM order_items WHERE order_id = ANY($1::bigint[]) ORDER BY id`,
    [ids],
  );
  const discounts = await db.query<{ order_id: bigint; id: bigint; code: string; amount: bigint; created_at: Date }>(
    `SELECT order_id, id, code, amount, created_at FROM order_discounts WHERE order_id = ANY($1::bigint[]) ORDER BY id`,
    [ids],
  );
  const shipments = await db.query<{
    id: string;
    order_id: bigint;
    carrier: string;
    tracking_number: string;
    created_at: Date;
  }>(
    `SELECT id, order_id, carrier, tracking_number, created_at FROM shipments WHERE order_id = ANY($1::bigint[]) ORDER BY created_at, id`,
    [ids],
  );
  return rows.map((r) => ({
    id: r.id,
    tenantId: r.tenant_id,
    userId: r.user_id,
    status: r.status,
    currency: r.currency,
    note: r.note,
    paymentId: r.payment_id,
    refundId: r.refund_id,
    version: r.version,
    stepInProgress: r.step_in_progress ?? undefined,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    items: items.rows.filter((i) => i.order_id === r.id).map(toItem),
    discounts: discounts.rows.filter((d) => d.order_id === r.id).map(toDiscount),
    shipments: shipments.rows.filter((s) => s.order_id === r.id).map(toShipment),
  }));
}

async function one(db: SqlExecutor, row: OrderRow | undefined): Promise<OrderRecord | undefined> {
  return row ? (await aggregates(db, [row]))[0] : undefined;
}

async function reread(tx: SqlExecutor, id: bigint): Promise<OrderRecord> {
  const { rows } = await tx.query<OrderRow>(`SELECT ${ORDER_COLUMNS} FROM orders WHERE id = $1`, [id]);
  return (await one(tx, rows[0]))!;
}

/** Rereads an order whose status just changed in `tx`, and records the event that reports it there. */
async function rereadChanged(tx: SqlExecutor, id: bigint): Promise<OrderRecord> {
  const order = await reread(tx, id);
  const event = statusEventOf(order);
  if (event) await appendEvent(tx, event);
  return order;
}

/** Bumps the order's version (and sets the given columns) inside the caller's transaction. */
async function touch(tx: SqlExecutor, id: bigint, set = "", params: unknown[] = []): Promise<void> {
  await tx.query(`UPDATE orders SET ${set}version = version + 1, updated_at = ${NOW} WHERE id = $1`, [id, ...params]);
}

export class SqlOrdersStore implements OrdersStore {
  constructor(private readonly db: SqlDatabase) {}

  async createOrder(
    tenantId: string,
    userId: bigint,
    order: { currency: string; note: string; items: NewItem[] },
    { idempotency, call }: { idempotency?: KeyedRequest<OrderRecord> | undefined; call?: CallScope | undefined } = {},
  ) {
    const work = async (tx: SqlExecutor) => {
      const { rows } = await tx.query<OrderRow>(
        `INSERT INTO orders (tenant_id, user_id, status, currency, note) VALUES ($1, $2, 'pending', $3, $4) RETURNING ${ORDER_COLUMNS}`,
        [tenantId, userId, order.currency, order.note],
      );
      const created = rows[0]!;
      for (const item of order.items) {
        await tx.query(`INSERT INTO order_items (order_id, sku, quantity, unit_price) VALUES ($1, $2, $3, $4)`, [
          created.id,
          item.sku,
          item.quantity,
          item.unitPrice,
        ]);
      }
      return (await one(tx, created))!;
    };
    if (!idempotency) return { result: await this.db.transaction(work, call), replayed: false };
    return runIdempotent(this.db, { tenantId, operation: CREATE_ORDER, ...idempotency, call }, orderCodec, work);
  }

  findCreatedOrder(tenantId: string, idempotency: KeyedRequest<OrderRecord>) {
    return findIdempotentResult(this.db, { tenantId, operation: CREATE_ORDER, ...idempotency }, orderCodec);
  }

  async getOrder(tenantId: string, id: bigint): Promise<OrderRecord | undefined> {
    const { rows } = await this.db.query<OrderRow>(
      `SELECT ${ORDER_COLUMNS} FROM orders WHERE id = $1 AND tenant_id = $2`,
      [id, tenantId],
    );
    return one(this.db, rows[0]);
  }

  async listUserOrders(
    tenantId: string,
    userId: bigint,
    after: Keyset | undefined,
    limit: number,
  ): Promise<OrderRecord[]> {
    const rows = await USER_ORDERS_PAGE.rows<OrderRow>(this.db, [tenantId, userId], { after, limit });
    return aggregates(this.db, rows);
  }

  /** Runs `work` on the order under its row lock (404 when there is no such order). */
  private locked<T>(
    tenantId: string,
    id: bigint,
    work: (tx: SqlExecutor, order: OrderRecord) => Promise<T>,
    call: CallScope | undefined,
  ): Promise<T> {
    return this.db.transaction(async (tx) => {
      const lock = await tx.query(`SELECT id FROM orders WHERE id = $1 AND tenant_id = $2 FOR UPDATE`, [id, tenantId]);
      if (lock.rowCount === 0) throw new DomainError("NOT_FOUND", "order not found");
      // Read after the lock is held, in a statement of its own: one that waited for the lock sees
      // what the holder committed (a step it started, too), never the snapshot it began with.
      return work(tx, await reread(tx, id));
    }, call);
  }

  updateNote(tenantId: string, id: bigint, note: string, { check, call }: ChangeGuard): Promise<OrderRecord> {
    return this.locked(
      tenantId,
      id,
      async (tx, order) => {
        check(order);
        await touch(tx, id, "note = $2, ", [note]);
        return reread(tx, id);
      },
      call,
    );
  }

  addItem(tenantId: string, id: bigint, item: NewItem, { check, call }: ChangeGuard) {
    return this.locked(
      tenantId,
      id,
      async (tx, order) => {
        check(order);
        const { rows } = await tx.query<{
          id: bigint;
          sku: string;
          quantity: bigint;
          unit_price: bigint;
          created_at: Date;
        }>(
          `INSERT INTO order_items (order_id, sku, quantity, unit_price) VALUES ($1, $2, $3, $4) RETURNING id, sku, quantity, unit_price, created_at`,
          [id, item.sku, item.quantity, item.unitPrice],
        );
        await touch(tx, id);
        return { order: await reread(tx, id), item: toItem(rows[0]!) };
      },
      call,
    );
  }

  addDiscount(tenantId: string, id: bigint, discount: { code: string; amount: bigint }, { check, call }: ChangeGuard) {
    return this.locked(
      tenantId,
      id,
      async (tx, order) => {
        check(order);
        const { rows } = await tx.query<{ id: bigint; code: string; amount: bigint; created_at: Date }>(
          `INSERT INTO order_discounts (order_id, code, amount) VALUES ($1, $2, $3) RETURNING id, code, amount, created_at`,
          [id, discount.code, discount.amount],
        );
        await touch(tx, id);
        return { order: await reread(tx, id), discount: toDiscount(rows[0]!) };
      },
      call,
    );
  }

  act(
    tenantId: string,
    id: bigint,
    decide: (order: OrderRecord) => OrderAction,
    call?: CallScope,
  ): Promise<{ order: OrderRecord; step?: StepRecord }> {
    return this.locked(
      tenantId,
      id,
      async (tx, order) => {
        const action = decide(order);
        if (action.kind === "transition") {
          await touch(tx, id, "status = $2, ", [action.to]);
          if (action.shipment) {
            await tx.query(`INSERT INTO shipments (id, order_id, carrier, tracking_number) VALUES ($1, $2, $3, $4)`, [
              newId("shp"),
              id,
              action.shipment.carrier,
              action.shipment.trackingNumber,
            ]);
          }
          return { order: await rereadChanged(tx, id) };
        }
        const { rows: attempts } = await tx.query<{ n: number }>(
          `SELECT COALESCE(max(attempt), 0)::integer + 1 AS n FROM order_steps WHERE order_id = $1 AND kind = $2`,
          [id, action.step],
        );
        const attempt = Number(attempts[0]!.n);
        // The deadline is the database's clock, like the reconciler's: replicas' clocks never meet.
        const { rows } = await tx.query<StepRow>(
          `INSERT INTO order_steps (order_id, tenant_id, kind, attempt, amount, currency, idempotency_key, payment_id, deadline_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, clock_timestamp() + $9::bigint * interval '1 millisecond')
         RETURNING ${STEP_COLUMNS}`,
          [
            id,
            tenantId,
            action.step,
            attempt,
            action.amount,
            action.currency,
            action.keyFor(attempt),
            action.paymentId,
            action.deadlineMs,
          ],
        );
        await touch(tx, id);
        return { order: await reread(tx, id), step: toStep(rows[0]!) };
      },
      call,
    );
  }

  settleStep(step: StepRecord, outcome: StepOutcome, call?: CallScope): Promise<OrderRecord | undefined> {
    return this.db.transaction(async (tx) => {
      const settled = await tx.query(
        `UPDATE order_steps SET state = $2, payment_id = COALESCE($3, payment_id), refund_id = COALESCE($4, refund_id), outcome = $5, settled_at = clock_timestamp()
         WHERE id = $1 AND state = 'pending'`,
        [
          step.id,
          outcome.moved ? "succeeded" : "failed",
          outcome.moved ? (outcome.paymentId ?? null) : null,
          outcome.moved ? (outcome.refundId ?? null) : null,
          outcome.note,
        ],
      );
      if (settled.rowCount === 0) return undefined;
      // Nothing else changed the order's status while the step was unsettled: every action refuses then.
      if (!outcome.moved) {
        await touch(tx, step.orderId);
        return reread(tx, step.orderId);
      }
      if (step.kind === "charge")
        await touch(tx, step.orderId, "status = 'paid', payment_id = $2, ", [outcome.paymentId ?? ""]);
      else await touch(tx, step.orderId, "status = 'cancelled', refund_id = $2, ", [outcome.refundId ?? ""]);
      return rereadChanged(tx, step.orderId);
    }, call);
  }

  async getStep(id: bigint): Promise<StepRecord | undefined> {
    const { rows } = await this.db.query<StepRow>(`SELECT ${STEP_COLUMNS} FROM order_steps WHERE id = $1`, [id]);
    return rows[0] && toStep(rows[0]);
  }

  async dueSteps(limit: number): Promise<StepRecord[]> {
    const { rows } = await this.db.query<StepRow>(
      `SELECT ${STEP_COLUMNS} FROM order_steps WHERE state = 'pending' AND deadline_at < clock_timestamp() ORDER BY deadline_at LIMIT $1`,
      [limit],
    );
    return rows.map(toStep);
  }

  takeLease(name: string, holder: string, ttlMs: number): Promise<boolean> {
    return takeLease(this.db, name, holder, ttlMs);
  }

  releaseLease(name: string, holder: string): Promise<void> {
    return releaseLease(this.db, name, holder);
  }

  watchStatusChanges(
    onChange: (change: OrderStatusChange) => void,
    onResync: () => void,
  ): Promise<() => Promise<void>> {
    // The channel the announce_order_status trigger notifies (migration 3).
    return this.db.listen(
      `${this.db.schema}_order_status`,
      (payload) => {
        try {
          const { t, i, s, u } = JSON.parse(payload) as { t: string; i: string; s: OrderStatus; u: number };
          onChange({ tenantId: t, orderId: BigInt(i), status: s, updatedAt: new Date(u) });
        } catch {
          // Not ours: ignore.
        }
      },
      onResync,
    );
  }
}
