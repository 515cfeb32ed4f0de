// OrderService RPC handlers: proto in, proto out. The state machine decides, the store writes
// conditionally, and payments is called with the caller's token, deadline and abort signal.
import type { HandlerContext, ServiceImpl, Client } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { OrderService, OrderStatus as ProtoStatus, TrackOrdersResponseSchema, type TrackOrdersResponse } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import type { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import {
  assertCurrency,
  assertIdempotencyKey,
  AsyncQueue,
  decodeCursor,
  derivedIdempotencyKey,
  downstreamOptions,
  fail,
  pageOf,
  pageSizeOf,
  requestFingerprint,
  type Caller,
  type TokenVerifier,
} from "@switchyard/platform";
import { checkDiscount, MAX_ITEMS, totalsOf, validateDiscountCode, validateItem, validateItems, validateNote, type NewItem } from "./domain/orders.js";
import { guardContentsChange, guardTransition, refuseStatusWrite } from "./domain/state-machine.js";
import type { OrderEvents } from "./events.js";
import { discountToProto, itemToProto, orderToProto, shipmentToProto, STATUS_TO_PROTO } from "./proto-mapping.js";
import type { OrderRecord, OrdersStore } from "./store/port.js";

export interface OrdersDeps {
  store: OrdersStore;
  verifier: TokenVerifier;
  payments: Client<typeof PaymentService>;
  events: OrderEvents;
}

const SHIPPING_FIELD_MAX = 100;

function orderIdOf(raw: bigint): bigint {
  if (raw <= 0n) throw fail("INVALID_REQUEST", "order_id must be a positive integer");
  return raw;
}

function itemOf(item: { sku: string; quantity: bigint; unitPrice: bigint } | undefined): NewItem {
  if (!item) throw fail("INVALID_REQUEST", "item is required");
  return { sku: item.sku, quantity: item.quantity, unitPrice: item.unitPrice };
}

export function orderHandlers({ store, verifier, payments, events }: OrdersDeps): ServiceImpl<typeof OrderService> {
  async function load(caller: Caller, id: bigint): Promise<OrderRecord> {
    const order = await store.getOrder(caller.tenantId, orderIdOf(id));
    if (!order) throw fail("NOT_FOUND", "order not found");
    return order;
  }

  function published(order: OrderRecord): OrderRecord {
    events.publish({ tenantId: order.tenantId, orderId: order.id, status: order.status, updatedAt: order.updatedAt });
    return order;
  }

  /** The write missed: someone else moved the order first. */
  async function conflict(caller: Caller, id: bigint): Promise<never> {
    const now = await load(caller, id);
    throw fail("INVALID_STATE", `the order changed concurrently and is now ${now.status}; read it again before deciding`, { current_status: now.status });
  }

  return {
    async createOrder(req, ctx) {
      const caller = await verifier.authenticate(ctx);
      if (req.idempotencyKey !== "") assertIdempotencyKey(req.idempotencyKey);
      assertCurrency(req.currency);
      const items = validateItems(req.items.map(itemOf));
      const note = validateNote(req.note);
      const requestHash = requestFingerprint({
        currency: req.currency,
        note,
        items: items.map((i) => `${i.sku}*${i.quantity}@${i.unitPrice}`).join(","),
      });
      const outcome = await store.createOrder(caller.tenantId, caller.userId, { currency: req.currency, note, items }, req.idempotencyKey ? { key: req.idempotencyKey, requestHash } : undefined);
      if (!outcome.replayed) published(outcome.result);
      return { order: orderToProto(outcome.result), replayed: outcome.replayed };
    },

    async getOrder(req, ctx) {
      const caller = await verifier.authenticate(ctx);
      return { order: orderToProto(await load(caller, req.orderId)) };
    },

    async updateOrder(req, ctx) {
      const caller = await verifier.authenticate(ctx);
      if (req.status !== undefined) refuseStatusWrite();
      if (req.note === undefined) return { order: orderToProto(await load(caller, req.orderId)) };
      const updated = await store.updateNote(caller.tenantId, orderIdOf(req.orderId), validateNote(req.note));
      if (!updated) throw fail("NOT_FOUND", "order not found");
      return { order: orderToProto(updated) };
    },

    async listUserOrders(req, ctx) {
      const caller = await verifier.authenticate(ctx);
      if (req.userId <= 0n) throw fail("INVALID_REQUEST", "user_id must be a positive integer");
      const size = pageSizeOf(req.pageSize);
      const collection = `orders:${caller.tenantId}:${req.userId}`;
      const rows = await store.listUserOrders(caller.tenantId, req.userId, decodeCursor(collection, req.pageToken, "number"), size + 1);
      const page = pageOf(rows, size, collection, (o) => ({ createdAt: o.createdAt, id: o.id.toString() }));
      return { orders: page.items.map(orderToProto), nextPageToken: page.nextCursor };
    },

    async payOrder(req, ctx) {
      const caller = await verifier.authenticate(ctx);
      const order = await load(caller, req.orderId);
      const next = guardTransition("pay", order.status);
      const { total } = totalsOf(order.items, order.discounts);
      if (total <= 0n) throw fail("RULE_VIOLATION", "the order total is zero: there is nothing to pay", { field: "total" });
      // The key is derived from the order and the version charged: a retried pay never charges twice.
      const key = derivedIdempotencyKey(caller.tenantId, "order-payment", order.id, order.version);
      const { payment } = await payments.createPayment({ idempotencyKey: key, amount: total, currency: order.currency, source: req.source }, downstreamOptions(caller, ctx));
      const paymentId = payment!.id;
      const paid = await store.transition(caller.tenantId, order.id, { from: order.status, to: next, version: order.version, paymentId });
      if (!paid) {
        const now = await load(caller, order.id);
        if (now.paymentId !== paymentId) {
          // The order moved on while it was being charged: give the money back before reporting.
          await payments.createRefund(
            { idempotencyKey: derivedIdempotencyKey(caller.tenantId, "order-payment-compensation", paymentId), paymentId, amount: total, reason: "order changed while it was being paid" },
            downstreamOptions(caller, ctx),
          );
        }
        return conflict(caller, order.id);
      }
      return { order: orderToProto(published(paid)), paymentId };
    },

    async shipOrder(req, ctx) {
      const caller = await verifier.authenticate(ctx);
      if (req.carrier.length > SHIPPING_FIELD_MAX || req.trackingNumber.length > SHIPPING_FIELD_MAX) {
        throw fail("RULE_VIOLATION", `carrier and tracking_number are at most ${SHIPPING_FIELD_MAX} characters`, { field: "carrier" });
      }
      const order = await load(caller, req.orderId);
      const next = guardTransition("ship", order.status);
      const shipped = await store.transition(caller.tenantId, order.id, { from: order.status, to: next, version: order.version, shipment: { carrier: req.carrier, trackingNumber: req.trackingNumber } });
      if (!shipped) return conflict(caller, order.id);
      return { order: orderToProto(published(shipped)), shipment: shipmentToProto(shipped.shipments[shipped.shipments.length - 1]!) };
    },

    async cancelOrder(req, ctx) {
      const caller = await verifier.authenticate(ctx);
      const order = await load(caller, req.orderId);
      const next = guardTransition("cancel", order.status);
      // Cancel first (conditionally), so a concurrent ship or cancel cannot also win; then refund.
      const cancelled = await store.transition(caller.tenantId, order.id, { from: order.status, to: next, version: order.version });
      if (!cancelled) return conflict(caller, order.id);
      if (order.status !== "paid") return { order: orderToProto(published(cancelled)), refundId: "" };
      const { total } = totalsOf(order.items, order.discounts);
      let refundId: string;
      try {
        // One cancel refund per order, ever: a retry after a timeout replays it instead of refunding twice.
        const key = derivedIdempotencyKey(caller.tenantId, "order-cancel-refund", order.id);
        const { refund } = await payments.createRefund({ idempotencyKey: key, paymentId: order.paymentId, amount: total, reason: "order cancelled" }, downstreamOptions(caller, ctx));
        refundId = refund!.id;
      } catch (err) {
        // The refund did not happen (or its outcome is unknown): the order stays paid; a retry is safe.
        await store.transition(caller.tenantId, order.id, { from: "cancelled", to: "paid", version: cancelled.version });
        throw err;
      }
      const refunded = await store.transition(caller.tenantId, order.id, { from: "cancelled", to: "cancelled", version: cancelled.version, refundId });
      return { order: orderToProto(published(refunded ?? cancelled)), refundId };
    },

    async addItem(req, ctx) {
      const caller = await verifier.authenticate(ctx);
      const item = validateItem(itemOf(req.item));
      const { order, item: added } = await store.addItem(caller.tenantId, orderIdOf(req.orderId), item, (o) => {
        guardContentsChange(o.status);
        if (o.items.length >= MAX_ITEMS) throw fail("RULE_VIOLATION", `an order holds at most ${MAX_ITEMS} items`, { field: "items" });
      });
      return { item: itemToProto(added), order: orderToProto(order) };
    },

    async listItems(req, ctx) {
      const caller = await verifier.authenticate(ctx);
      return { items: (await load(caller, req.orderId)).items.map(itemToProto) };
    },

    async addDiscount(req, ctx) {
      const caller = await verifier.authenticate(ctx);
      const code = validateDiscountCode(req.code);
      const { order, discount } = await store.addDiscount(caller.tenantId, orderIdOf(req.orderId), { code, amount: req.amount }, (o) => {
        guardContentsChange(o.status);
        checkDiscount(totalsOf(o.items, o.discounts), req.amount);
      });
      return { discount: discountToProto(discount), order: orderToProto(order) };
    },

    async listDiscounts(req, ctx) {
      const caller = await verifier.authenticate(ctx);
      return { discounts: (await load(caller, req.orderId)).discounts.map(discountToProto) };
    },

    async *trackOrders(requests, ctx: HandlerContext) {
      const caller = await verifier.authenticate(ctx);
      const followed = new Set<bigint>();
      const queue = new AsyncQueue<TrackOrdersResponse>();
      const report = (orderId: bigint, status: ProtoStatus, at: Date) => queue.push(create(TrackOrdersResponseSchema, { orderId, status, updateTime: timestampFromDate(at) }));
      const unsubscribe = events.subscribe((change) => {
        if (change.tenantId === caller.tenantId && followed.has(change.orderId)) report(change.orderId, STATUS_TO_PROTO[change.status], change.updatedAt);
      });
      // The two directions are independent: the client may stop sending and keep listening.
      const reading = (async () => {
        for await (const request of requests) {
          const action = request.action;
          if (action.case === "followOrderId") {
            followed.add(action.value);
            const order = action.value > 0n ? await store.getOrder(caller.tenantId, action.value) : undefined;
            report(action.value, order ? STATUS_TO_PROTO[order.status] : ProtoStatus.UNSPECIFIED, order?.updatedAt ?? new Date());
          } else if (action.case === "dropOrderId") {
            followed.delete(action.value);
          }
        }
      })().catch((err: unknown) => {
        if (!ctx.signal.aborted) queue.fail(err);
      });
      const end = () => queue.close();
      ctx.signal.addEventListener("abort", end, { once: true });
      try {
        yield* queue;
      } finally {
        unsubscribe();
        ctx.signal.removeEventListener("abort", end);
        void reading;
      }
    },
  };
}
