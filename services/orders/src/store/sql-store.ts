// OrdersStore on the PostgreSQL-family adapter. Status changes are conditional writes on
// (status, version); content changes lock the order row first.
import { fail, jsonResultCodec, newId, runIdempotent, type Keyset, type SqlDatabase, type SqlExecutor } from "@switchyard/platform";
import type { NewItem } from "../domain/orders.js";
import type { OrderStatus } from "../domain/state-machine.js";
import type { DiscountRecord, ItemRecord, OrderRecord, OrdersStore, ShipmentRecord, TransitionWrite } from "./port.js";

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
  created_at: Date;
  updated_at: Date;
}

const ORDER_COLUMNS = "id, tenant_id, user_id, status, currency, note, payment_id, refund_id, version, created_at, updated_at";
const NOW = "date_trunc('milliseconds', clock_timestamp())";
const orderCodec = jsonResultCodec<OrderRecord>();

const toItem = (r: { id: bigint; sku: string; quantity: bigint; unit_price: bigint; created_at: Date }): ItemRecord => ({ id: r.id, sku: r.sku, quantity: r.quantity, unitPrice: r.unit_price, createdAt: r.created_at });
const toDiscount = (r: { id: bigint; code: string; amount: bigint; created_at: Date }): DiscountRecord => ({ id: r.id, code: r.code, amount: r.amount, createdAt: r.created_at });
const toShipment = (r: { id: string; order_id: bigint; carrier: string; tracking_number: string; created_at: Date }): ShipmentRecord => ({
  id: r.id,
  orderId: r.order_id,
  carrier: r.carrier,
  trackingNumber: r.tracking_number,
  createdAt: r.created_at,
});

/** Orders with their items, discounts and shipments: four queries for any number of orders. */
async function aggregates(db: SqlExecutor, rows: OrderRow[]): Promise<OrderRecord[]> {
  if (rows.length === 0) return [];
  const ids = rows.map((r) => r.id.toString());
  // One after another: a transaction's client runs one statement at a time.
  const items = await db.query<{ order_id: bigint; id: bigint; sku: string; quantity: bigint; unit_price: bigint; created_at: Date }>(`SELECT order_id, id, sku, quantity, unit_price, created_at FROM order_items WHERE order_id = ANY($1::bigint[]) ORDER BY id`, [ids]);
  const discounts = await db.query<{ order_id: bigint; id: bigint; code: string; amount: bigint; created_at: Date }>(`SELECT order_id, id, code, amount, created_at FROM order_discounts WHERE order_id = ANY($1::bigint[]) ORDER BY id`, [ids]);
  const shipments = await db.query<{ id: string; order_id: bigint; carrier: string; tracking_number: string; created_at: Date }>(`SELECT id, order_id, carrier, tracking_number, created_at FROM shipments WHERE order_id = ANY($1::bigint[]) ORDER BY created_at, id`, [ids]);
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

export class SqlOrdersStore implements OrdersStore {
  constructor(private readonly db: SqlDatabase) {}

  async createOrder(tenantId: string, userId: bigint, order: { currency: string; note: string; items: NewItem[] }, idempotency: { key: string; requestHash: string } | undefined) {
    const work = async (tx: SqlExecutor) => {
      const { rows } = await tx.query<OrderRow>(`INSERT INTO orders (tenant_id, user_id, status, currency, note) VALUES ($1, $2, 'pending', $3, $4) RETURNING ${ORDER_COLUMNS}`, [tenantId, userId, order.currency, order.note]);
      const created = rows[0]!;
      for (const item of order.items) {
        await tx.query(`INSERT INTO order_items (order_id, sku, quantity, unit_price) VALUES ($1, $2, $3, $4)`, [created.id, item.sku, item.quantity, item.unitPrice]);
      }
      return (await one(tx, created))!;
    };
    if (!idempotency) return { result: await this.db.transaction(work), replayed: false };
    return runIdempotent(this.db, { tenantId, operation: "orders.create", ...idempotency }, orderCodec, work);
  }

  async getOrder(tenantId: string, id: bigint): Promise<OrderRecord | undefined> {
    const { rows } = await this.db.query<OrderRow>(`SELECT ${ORDER_COLUMNS} FROM orders WHERE id = $1 AND tenant_id = $2`, [id, tenantId]);
    return one(this.db, rows[0]);
  }

  async updateNote(tenantId: string, id: bigint, note: string): Promise<OrderRecord | undefined> {
    const { rows } = await this.db.query<OrderRow>(
      `UPDATE orders SET note = $3, version = version + 1, updated_at = ${NOW} WHERE id = $1 AND tenant_id = $2 RETURNING ${ORDER_COLUMNS}`,
      [id, tenantId, note],
    );
    return one(this.db, rows[0]);
  }

  async listUserOrders(tenantId: string, userId: bigint, after: Keyset | undefined, limit: number): Promise<OrderRecord[]> {
    const { rows } = after
      ? await this.db.query<OrderRow>(
          `SELECT ${ORDER_COLUMNS} FROM orders WHERE tenant_id = $1 AND user_id = $2 AND (created_at, id) < ($3, $4) ORDER BY created_at DESC, id DESC LIMIT $5`,
          [tenantId, userId, after.createdAt, after.id, limit],
        )
      : await this.db.query<OrderRow>(`SELECT ${ORDER_COLUMNS} FROM orders WHERE tenant_id = $1 AND user_id = $2 ORDER BY created_at DESC, id DESC LIMIT $3`, [tenantId, userId, limit]);
    return aggregates(this.db, rows);
  }

  transition(tenantId: string, id: bigint, write: TransitionWrite): Promise<OrderRecord | undefined> {
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<OrderRow>(
        `UPDATE orders SET status = $5, version = version + 1, updated_at = ${NOW},
           payment_id = COALESCE($6, payment_id), refund_id = COALESCE($7, refund_id)
         WHERE id = $1 AND tenant_id = $2 AND status = $3 AND version = $4
         RETURNING ${ORDER_COLUMNS}`,
        [id, tenantId, write.from, write.version, write.to, write.paymentId ?? null, write.refundId ?? null],
      );
      if (!rows[0]) return undefined;
      if (write.shipment) {
        await tx.query(`INSERT INTO shipments (id, order_id, carrier, tracking_number) VALUES ($1, $2, $3, $4)`, [newId("shp"), id, write.shipment.carrier, write.shipment.trackingNumber]);
      }
      return one(tx, rows[0]);
    });
  }

  private changeContents<T>(tenantId: string, id: bigint, check: (order: OrderRecord) => void, insert: (tx: SqlExecutor) => Promise<T>) {
    return this.db.transaction(async (tx) => {
      const locked = await tx.query<OrderRow>(`SELECT ${ORDER_COLUMNS} FROM orders WHERE id = $1 AND tenant_id = $2 FOR UPDATE`, [id, tenantId]);
      const order = await one(tx, locked.rows[0]);
      if (!order) throw fail("NOT_FOUND", "order not found");
      check(order);
      const added = await insert(tx);
      const { rows } = await tx.query<OrderRow>(`UPDATE orders SET version = version + 1, updated_at = ${NOW} WHERE id = $1 RETURNING ${ORDER_COLUMNS}`, [id]);
      return { order: (await one(tx, rows[0]))!, added };
    });
  }

  async addItem(tenantId: string, id: bigint, item: NewItem, check: (order: OrderRecord) => void) {
    const { order, added } = await this.changeContents(tenantId, id, check, async (tx) => {
      const { rows } = await tx.query<{ id: bigint; sku: string; quantity: bigint; unit_price: bigint; created_at: Date }>(
        `INSERT INTO order_items (order_id, sku, quantity, unit_price) VALUES ($1, $2, $3, $4) RETURNING id, sku, quantity, unit_price, created_at`,
        [id, item.sku, item.quantity, item.unitPrice],
      );
      return toItem(rows[0]!);
    });
    return { order, item: added };
  }

  async addDiscount(tenantId: string, id: bigint, discount: { code: string; amount: bigint }, check: (order: OrderRecord) => void) {
    const { order, added } = await this.changeContents(tenantId, id, check, async (tx) => {
      const { rows } = await tx.query<{ id: bigint; code: string; amount: bigint; created_at: Date }>(
        `INSERT INTO order_discounts (order_id, code, amount) VALUES ($1, $2, $3) RETURNING id, code, amount, created_at`,
        [id, discount.code, discount.amount],
      );
      return toDiscount(rows[0]!);
    });
    return { order, discount: added };
  }
}
