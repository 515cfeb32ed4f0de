// OrderService RPC handlers: proto in, proto out. Who may act is decided in domain/access, what a
// state allows in domain/state-machine and domain/steps; paying and cancelling — the steps that
// move money through payments — are the workflow's (workflow/money-steps.ts).
import type { HandlerContext, ServiceImpl, Client } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  OrderService,
  OrderStatus as ProtoStatus,
  TrackOrdersResponseSchema,
  type NewItem as ProtoNewItem,
  type TrackOrdersResponse,
} from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import type { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { fail } from "@switchyard/platform/errors.js";
import { principalOf, type Caller } from "@switchyard/platform/caller.js";
import { authentication, callerOf, callScopeOf, idempotencyKeys, USERS } from "@switchyard/platform/grpc";
import type { Authenticator, CallPolicy, ServiceInterceptor } from "@switchyard/platform/grpc";
import { AsyncQueue } from "@switchyard/platform/async-queue.js";
import { requestFingerprint } from "@switchyard/platform/idempotency-keys.js";
import { decodeCursor, pageOf, pageSizeOf } from "@switchyard/platform/paging.js";
import { canSeeOrder, requireListOf, requireOrderAdmin, visibleOrder } from "./domain/access.js";
import {
  checkDiscount,
  guardRoomForDiscount,
  guardRoomForItem,
  priceItems,
  totalsOf,
  validateDiscountCode,
  validateItem,
  validateNewOrder,
  validateNote,
  validateShipment,
  type RequestedItem,
} from "./domain/orders.js";
import { guardContentsChange, guardTransition, refuseStatusWrite } from "./domain/state-machine.js";
import { guardNoStepInProgress } from "./domain/steps.js";
import type { OrderEvents } from "./events.js";
import {
  discountToProto,
  itemToProto,
  orderBytes,
  orderToProto,
  shipmentToProto,
  STATUS_TO_PROTO,
} from "./proto-mapping.js";
import type { OrderRecord, OrdersStore } from "./store/port.js";
import { catalogPrices } from "./workflow/catalog-prices.js";
import type { MoneySteps } from "./workflow/money-steps.js";

export interface OrdersDeps {
  store: OrdersStore;
  content: Client<typeof ContentService>;
  steps: MoneySteps;
  events: OrderEvents;
}

function orderIdOf(raw: bigint): bigint {
  if (raw <= 0n) throw fail("INVALID_REQUEST", "order_id must be a positive integer");
  return raw;
}

function requestedItem(item: ProtoNewItem | undefined): RequestedItem {
  if (!item) throw fail("INVALID_REQUEST", "item is required");
  return { sku: item.sku, quantity: item.quantity, expectedUnitPrice: item.expectedUnitPrice };
}

/** The order may change its contents: pending, and no money step under way. */
function guardEdit(order: OrderRecord): void {
  guardNoStepInProgress(order);
  guardContentsChange(order.status);
}

/** Who may call orders: every method is a user's (no service acts on orders as itself). */
export const ordersCallPolicy: CallPolicy<typeof OrderService> = {
  createOrder: USERS,
  getOrder: USERS,
  updateOrder: USERS,
  listUserOrders: USERS,
  payOrder: USERS,
  shipOrder: USERS,
  cancelOrder: USERS,
  addItem: USERS,
  listItems: USERS,
  addDiscount: USERS,
  listDiscounts: USERS,
  trackOrders: USERS,
};

/**
 * What every call to orders goes through before its handler, besides the server's own steps: its
 * caller, as the call policy says; then the key of a new order, which a client may leave out.
 */
export const ordersInterceptors = (authenticator: Authenticator): ServiceInterceptor[] => [
  authentication<typeof OrderService>({ authenticator, access: ordersCallPolicy }),
  idempotencyKeys<typeof OrderService>({ createOrder: "optional" }),
];

export function orderHandlers({ store, content, steps, events }: OrdersDeps): ServiceImpl<typeof OrderService> {
  async function load(caller: Caller, id: bigint): Promise<OrderRecord> {
    return visibleOrder(caller, await store.getOrder(caller.tenantId, orderIdOf(id)));
  }

  return {
    async createOrder(req, ctx) {
      const caller = callerOf(ctx);
      const requested = validateNewOrder(req.currency, req.items.map(requestedItem));
      const note = validateNote(req.note);
      // The key is the caller's own (principalOf): another user's key, however it was learnt, is another key.
      const idempotency = req.idempotencyKey
        ? {
            principal: principalOf(caller),
            key: req.idempotencyKey,
            requestHash: requestFingerprint({
              currency: req.currency,
              note,
              items: requested.map((i) => `${i.sku}*${i.quantity}@${i.expectedUnitPrice ?? "catalog"}`).join(","),
            }),
            ownsUnscoped: (order: OrderRecord | undefined) => order !== undefined && canSeeOrder(caller, order),
          }
        : undefined;
      // A retry gets the first order back even if the catalog has moved on (or is unreachable) since.
      const earlier = idempotency && (await store.findCreatedOrder(caller.tenantId, idempotency));
      if (earlier) return { order: orderToProto(earlier), replayed: true };
      const items = priceItems(
        requested,
        await catalogPrices(
          content,
          requested.map((i) => i.sku),
          caller,
          ctx,
        ),
        req.currency,
      );
      const outcome = await store.createOrder(
        caller.tenantId,
        caller.userId,
        { currency: req.currency, note, items },
        { idempotency, call: callScopeOf(ctx) },
      );
      return { order: orderToProto(outcome.result), replayed: outcome.replayed };
    },

    async getOrder(req, ctx) {
      const caller = callerOf(ctx);
      return { order: orderToProto(await load(caller, req.orderId)) };
    },

    async updateOrder(req, ctx) {
      const caller = callerOf(ctx);
      if (req.status !== undefined) refuseStatusWrite();
      if (req.note === undefined) return { order: orderToProto(await load(caller, req.orderId)) };
      const note = validateNote(req.note);
      const updated = await store.updateNote(caller.tenantId, orderIdOf(req.orderId), note, {
        check: (o) => {
          visibleOrder(caller, o);
          guardNoStepInProgress(o);
        },
        call: callScopeOf(ctx),
      });
      return { order: orderToProto(updated) };
    },

    async listUserOrders(req, ctx) {
      const caller = callerOf(ctx);
      if (req.userId <= 0n) throw fail("INVALID_REQUEST", "user_id must be a positive integer");
      requireListOf(caller, req.userId);
      const size = pageSizeOf(req.pageSize);
      const collection = `orders:${caller.tenantId}:${req.userId}`;
      const rows = await store.listUserOrders(
        caller.tenantId,
        req.userId,
        decodeCursor(collection, req.pageToken, "number"),
        size + 1,
      );
      // An order of 100 items is ~14 KB: a page of them ends at MAX_PAGE_BYTES, with a cursor to the rest.
      const page = pageOf(rows, size, {
        collection,
        keyOf: (o) => ({ createdAt: o.createdAt, id: o.id.toString() }),
        bytes: { bytesOf: orderBytes },
      });
      return { orders: page.items.map(orderToProto), nextPageToken: page.nextCursor };
    },

    async payOrder(req, ctx) {
      const caller = callerOf(ctx);
      const { order, paymentId } = await steps.pay(caller, orderIdOf(req.orderId), req.source, ctx);
      return { order: orderToProto(order), paymentId };
    },

    async shipOrder(req, ctx) {
      const caller = callerOf(ctx);
      requireOrderAdmin(caller);
      const shipment = validateShipment({ carrier: req.carrier, trackingNumber: req.trackingNumber });
      const { order } = await store.act(
        caller.tenantId,
        orderIdOf(req.orderId),
        (o) => {
          guardNoStepInProgress(o);
          return { kind: "transition", to: guardTransition("ship", o.status), shipment };
        },
        callScopeOf(ctx),
      );
      return { order: orderToProto(order), shipment: shipmentToProto(order.shipments[order.shipments.length - 1]!) };
    },

    async cancelOrder(req, ctx) {
      const caller = callerOf(ctx);
      const { order, refundId } = await steps.cancel(caller, orderIdOf(req.orderId), ctx);
      return { order: orderToProto(order), refundId };
    },

    async addItem(req, ctx) {
      const caller = callerOf(ctx);
      const requested = validateItem(requestedItem(req.item));
      // The order's currency prices the item; the order is checked again under its lock below.
      const current = await load(caller, req.orderId);
      guardEdit(current);
      const [item] = priceItems(
        [requested],
        await catalogPrices(content, [requested.sku], caller, ctx),
        current.currency,
      );
      const { order, item: added } = await store.addItem(caller.tenantId, current.id, item!, {
        check: (o) => {
          guardEdit(o);
          guardRoomForItem(o.items);
        },
        call: callScopeOf(ctx),
      });
      return { item: itemToProto(added), order: orderToProto(order) };
    },

    async listItems(req, ctx) {
      const caller = callerOf(ctx);
      return { items: (await load(caller, req.orderId)).items.map(itemToProto) };
    },

    async addDiscount(req, ctx) {
      const caller = callerOf(ctx);
      requireOrderAdmin(caller);
      const code = validateDiscountCode(req.code);
      const { order, discount } = await store.addDiscount(
        caller.tenantId,
        orderIdOf(req.orderId),
        { code, amount: req.amount },
        {
          check: (o) => {
            guardEdit(o);
            guardRoomForDiscount(o.discounts);
            checkDiscount(totalsOf(o.items, o.discounts), req.amount);
          },
          call: callScopeOf(ctx),
        },
      );
      return { discount: discountToProto(discount), order: orderToProto(order) };
    },

    async listDiscounts(req, ctx) {
      const caller = callerOf(ctx);
      return { discounts: (await load(caller, req.orderId)).discounts.map(discountToProto) };
    },

    async *trackOrders(requests, ctx: HandlerContext) {
      const caller = callerOf(ctx);
      /** Each followed order, with the status last reported for it. */
      const followed = new Map<bigint, ProtoStatus>();
      const queue = new AsyncQueue<TrackOrdersResponse>();
      const report = (orderId: bigint, status: ProtoStatus, at: Date) => {
        if (followed.has(orderId)) followed.set(orderId, status);
        queue.push(create(TrackOrdersResponseSchema, { orderId, status, updateTime: timestampFromDate(at) }));
      };
      // Changes may have gone unannounced (the store's connection broke): each followed order is read
      // again, and reported if it moved since it was last reported.
      const catchUp = async () => {
        for (const [orderId, last] of followed) {
          const order = await store.getOrder(caller.tenantId, orderId);
          const status = order && STATUS_TO_PROTO[order.status];
          if (order && status !== undefined && status !== last && followed.has(orderId))
            report(orderId, status, order.updatedAt);
        }
      };
      let catchingUp: Promise<void> = Promise.resolve();
      const unsubscribe = events.subscribe(
        (change) => {
          if (change.tenantId === caller.tenantId && followed.has(change.orderId))
            report(change.orderId, STATUS_TO_PROTO[change.status], change.updatedAt);
        },
        () => {
          catchingUp = catchingUp.then(catchUp).catch((err: unknown) => {
            if (!ctx.signal.aborted) queue.fail(err);
          });
        },
      );
      // The two directions are independent: the client may stop sending and keep listening.
      const reading = (async () => {
        for await (const request of requests) {
          const action = request.action;
          if (action.case === "followOrderId") {
            const found = action.value > 0n ? await store.getOrder(caller.tenantId, action.value) : undefined;
            // An order the caller may not see is reported like one that does not exist, and never followed.
            const order = found && canSeeOrder(caller, found) ? found : undefined;
            if (order) followed.set(action.value, STATUS_TO_PROTO[order.status]);
            report(
              action.value,
              order ? STATUS_TO_PROTO[order.status] : ProtoStatus.UNSPECIFIED,
              order?.updatedAt ?? new Date(),
            );
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
