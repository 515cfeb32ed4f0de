// What the orders service needs from storage.
import type { IdempotentOutcome, Keyset } from "@switchyard/platform";
import type { NewItem } from "../domain/orders.js";
import type { OrderStatus } from "../domain/state-machine.js";

export interface ItemRecord {
  id: bigint;
  sku: string;
  quantity: bigint;
  unitPrice: bigint;
  createdAt: Date;
}

export interface DiscountRecord {
  id: bigint;
  code: string;
  amount: bigint;
  createdAt: Date;
}

export interface ShipmentRecord {
  id: string;
  orderId: bigint;
  carrier: string;
  trackingNumber: string;
  createdAt: Date;
}

export interface OrderRecord {
  id: bigint;
  tenantId: string;
  userId: bigint;
  status: OrderStatus;
  currency: string;
  note: string;
  paymentId: string;
  refundId: string;
  /** Bumped by every change; a payment is tied to the version it charged. */
  version: number;
  createdAt: Date;
  updatedAt: Date;
  items: ItemRecord[];
  discounts: DiscountRecord[];
  shipments: ShipmentRecord[];
}

export interface TransitionWrite {
  from: OrderStatus;
  to: OrderStatus;
  /** The version the caller's decision was based on; the write misses if the order moved on. */
  version: number;
  paymentId?: string;
  refundId?: string;
  shipment?: { carrier: string; trackingNumber: string };
}

export interface OrdersStore {
  createOrder(
    tenantId: string,
    userId: bigint,
    order: { currency: string; note: string; items: NewItem[] },
    idempotency: { key: string; requestHash: string } | undefined,
  ): Promise<IdempotentOutcome<OrderRecord>>;
  getOrder(tenantId: string, id: bigint): Promise<OrderRecord | undefined>;
  updateNote(tenantId: string, id: bigint, note: string): Promise<OrderRecord | undefined>;
  listUserOrders(tenantId: string, userId: bigint, after: Keyset | undefined, limit: number): Promise<OrderRecord[]>;
  /** The conditional write of a status change: undefined when the order is not at (from, version) any more. */
  transition(tenantId: string, id: bigint, write: TransitionWrite): Promise<OrderRecord | undefined>;
  /**
   * Changes the order's contents under a row lock: `check` sees the locked order (and throws to refuse),
   * then the item or discount is added and the version bumped.
   */
  addItem(tenantId: string, id: bigint, item: NewItem, check: (order: OrderRecord) => void): Promise<{ order: OrderRecord; item: ItemRecord }>;
  addDiscount(tenantId: string, id: bigint, discount: { code: string; amount: bigint }, check: (order: OrderRecord) => void): Promise<{ order: OrderRecord; discount: DiscountRecord }>;
}
