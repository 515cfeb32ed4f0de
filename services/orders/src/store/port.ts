// What the orders service needs from storage.
import type { IdempotentOutcome, KeyedRequest } from "@switchyard/platform/store";
import type { Keyset } from "@switchyard/platform/paging.js";
import type { CallScope } from "@switchyard/platform/call-deadline.js";
import type { NewItem } from "../domain/orders.js";
import type { OrderStatus } from "../domain/state-machine.js";
import type { StepKind, StepState } from "../domain/steps.js";

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
  /** Bumped by every change. */
  version: number;
  /** The money step that has started and is not settled yet, if any. */
  stepInProgress: StepKind | undefined;
  createdAt: Date;
  updatedAt: Date;
  items: ItemRecord[];
  discounts: DiscountRecord[];
  shipments: ShipmentRecord[];
}

/** A money step: the intent recorded before payments is called, and its outcome after. */
export interface StepRecord {
  id: bigint;
  orderId: bigint;
  tenantId: string;
  kind: StepKind;
  attempt: number;
  amount: bigint;
  currency: string;
  idempotencyKey: string;
  /** The payment charged (charge, once settled) or refunded (refund). */
  paymentId: string;
  refundId: string;
  state: StepState;
  outcome: string;
  deadlineAt: Date;
  createdAt: Date;
  settledAt: Date | undefined;
}

/** What an action does to a locked order: change its status now, or start a money step. */
export type OrderAction =
  | { kind: "transition"; to: OrderStatus; shipment?: { carrier: string; trackingNumber: string } }
  | {
      kind: "step";
      step: StepKind;
      amount: bigint;
      currency: string;
      /** The payment a refund takes back ("" for a charge). */
      paymentId: string;
      keyFor: (attempt: number) => string;
      /** How long from now the step may stay unsettled before the reconciler settles it. */
      deadlineMs: number;
    };

/** How a step ended: money moved (with what it made), or none did. */
export type StepOutcome =
  { moved: true; paymentId?: string; refundId?: string; note: string } | { moved: false; note: string };

/** What a change of an order checks on the locked order (throws to refuse), and the call it is made for. */
export interface ChangeGuard {
  check(order: OrderRecord): void;
  call?: CallScope | undefined;
}

export interface OrdersStore {
  createOrder(
    tenantId: string,
    userId: bigint,
    order: { currency: string; note: string; items: NewItem[] },
    request?: { idempotency?: KeyedRequest<OrderRecord> | undefined; call?: CallScope | undefined },
  ): Promise<IdempotentOutcome<OrderRecord>>;
  /** The order an earlier create with this key made (replayed), if it is done; 422 for another request. */
  findCreatedOrder(tenantId: string, idempotency: KeyedRequest<OrderRecord>): Promise<OrderRecord | undefined>;
  getOrder(tenantId: string, id: bigint): Promise<OrderRecord | undefined>;
  listUserOrders(tenantId: string, userId: bigint, after: Keyset | undefined, limit: number): Promise<OrderRecord[]>;
  /**
   * Under the order's row lock: `check` sees the order (and throws to refuse), then the change is
   * made and the version bumped. Every change of an order goes through a lock like this one. `call`
   * (here and below): the call the change is made for, whose deadline bounds its transaction.
   */
  updateNote(tenantId: string, id: bigint, note: string, guard: ChangeGuard): Promise<OrderRecord>;
  addItem(
    tenantId: string,
    id: bigint,
    item: NewItem,
    guard: ChangeGuard,
  ): Promise<{ order: OrderRecord; item: ItemRecord }>;
  addDiscount(
    tenantId: string,
    id: bigint,
    discount: { code: string; amount: bigint },
    guard: ChangeGuard,
  ): Promise<{ order: OrderRecord; discount: DiscountRecord }>;
  /** A status change or the start of a money step, decided by `decide` on the locked order. */
  act(
    tenantId: string,
    id: bigint,
    decide: (order: OrderRecord) => OrderAction,
    call?: CallScope,
  ): Promise<{ order: OrderRecord; step?: StepRecord }>;
  /**
   * Records a step's outcome and what it means for the order (a charge: paid; a refund: cancelled;
   * nothing moved: unchanged), once: undefined when the step was settled already.
   */
  settleStep(step: StepRecord, outcome: StepOutcome, call?: CallScope): Promise<OrderRecord | undefined>;
  getStep(id: bigint): Promise<StepRecord | undefined>;
  /** Unsettled steps whose deadline has passed, oldest deadline first. */
  dueSteps(limit: number): Promise<StepRecord[]>;
  /** Takes or renews a named lease for `ttlMs`; false while another holder's lease runs. */
  takeLease(name: string, holder: string, ttlMs: number): Promise<boolean>;
  releaseLease(name: string, holder: string): Promise<void>;
  /**
   * Every new order and change of status committed by any replica, as announced, and `onResync` when
   * some may have gone unannounced (the store's connection was lost); returns the function that stops watching.
   */
  watchStatusChanges(onChange: (change: OrderStatusChange) => void, onResync: () => void): Promise<() => Promise<void>>;
}

export interface OrderStatusChange {
  tenantId: string;
  orderId: bigint;
  status: OrderStatus;
  updatedAt: Date;
}
