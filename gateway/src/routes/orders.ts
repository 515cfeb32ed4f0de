// /v1/orders… and /v1/users/{user_id}/orders, translated to OrderService calls. Status changes
// only through the action resources (payment, shipments, cancel).
import { ConnectError } from "@connectrpc/connect";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import { edgeError } from "../runtime/errors.js";
import { created, type RouteContext, type RouteGroup } from "../runtime/route.js";
import { cursorParam, listResult, pageSizeParam } from "../runtime/pagination.js";
import { discountJson, itemJson, orderJson, shipmentJson } from "@switchyard/platform/representations/orders.js";

interface ItemBody {
  sku: string;
  quantity: number;
  unit_price?: number;
}
interface OrderBody {
  currency: string;
  items?: ItemBody[];
  note?: string;
}

const orderId = (ctx: RouteContext) => BigInt(ctx.params.order_id as number);
// A sent unit_price is what the client expects to pay; the price itself comes from the catalog.
const toItem = (i: ItemBody) => ({
  sku: i.sku,
  quantity: BigInt(i.quantity),
  expectedUnitPrice: i.unit_price === undefined ? undefined : BigInt(i.unit_price),
});

async function orderOf(ctx: RouteContext) {
  return (await ctx.upstreams.orders.getOrder({ orderId: orderId(ctx) }, ctx.callOptions())).order!;
}

/** The resources that change an order's status (orders' actions pay, ship and cancel), beneath the order. */
const ACTION_RESOURCES = ["payment", "shipments", "cancel"] as const;

/**
 * Orders refuses a status write in its own terms (its actions); the API's answer names the action
 * resources, on the path of the version the request was made on.
 */
function namingActionResources(err: unknown, ctx: RouteContext): unknown {
  const info = err instanceof ConnectError ? errorInfoOf(err) : undefined;
  if (info?.reason !== "RULE_VIOLATION" || info.metadata.field !== "status") return err;
  const order = `${ctx.base}/orders/${String(ctx.params.order_id)}`;
  return edgeError(
    "RULE_VIOLATION",
    `status cannot be written; it changes through the action resources: ${ACTION_RESOURCES.map((r) => `POST ${order}/${r}`).join(", ")}`,
  );
}

/** A member of an order (item, discount, shipment) by id; 404 when the order has no such member. */
function member<T extends { id: bigint | string }>(members: T[], id: unknown, what: string): T {
  const found = members.find((m) => String(m.id) === String(id));
  if (!found) throw edgeError("NOT_FOUND", `${what} not found`);
  return found;
}

export const orderRoutes: RouteGroup = {
  upstream: "orders",
  handlers: {
    async createOrder(ctx) {
      const body = ctx.body as OrderBody;
      const key = ctx.params["idempotency-key"];
      const res = await ctx.upstreams.orders.createOrder(
        {
          idempotencyKey: typeof key === "string" ? key : "",
          currency: body.currency,
          items: (body.items ?? []).map(toItem),
          note: body.note ?? "",
        },
        ctx.callOptions(),
      );
      const order = res.order!;
      return created(orderJson(order), `${ctx.base}/orders/${order.id}`, res.replayed);
    },

    async getOrder(ctx) {
      return { status: 200, body: orderJson(await orderOf(ctx)) };
    },

    async updateOrder(ctx) {
      const body = ctx.body as { note?: string; status?: string };
      const { order } = await ctx.upstreams.orders
        .updateOrder({ orderId: orderId(ctx), note: body.note, status: body.status }, ctx.callOptions())
        .catch((err: unknown) => {
          throw namingActionResources(err, ctx);
        });
      return { status: 200, body: orderJson(order!) };
    },

    async listUserOrders(ctx) {
      const res = await ctx.upstreams.orders.listUserOrders(
        {
          userId: BigInt(ctx.params.user_id as number),
          pageSize: pageSizeParam(ctx.params.limit),
          pageToken: cursorParam(ctx.params.cursor),
        },
        ctx.callOptions(),
      );
      return listResult(ctx.path, ctx.params.limit, res.orders.map(orderJson), res.nextPageToken);
    },

    async payOrder(ctx) {
      const { source } = ctx.body as { source: string };
      const res = await ctx.upstreams.orders.payOrder({ orderId: orderId(ctx), source }, ctx.callOptions());
      return created(orderJson(res.order!), `${ctx.base}/payments/${res.paymentId}`);
    },

    async createShipment(ctx) {
      const body = (ctx.body ?? {}) as { carrier?: string; tracking_number?: string };
      const res = await ctx.upstreams.orders.shipOrder(
        { orderId: orderId(ctx), carrier: body.carrier ?? "", trackingNumber: body.tracking_number ?? "" },
        ctx.callOptions(),
      );
      const shipment = res.shipment!;
      return created(shipmentJson(shipment), `${ctx.base}/orders/${shipment.orderId}/shipments/${shipment.id}`);
    },

    async listShipments(ctx) {
      return listResult(ctx.path, undefined, (await orderOf(ctx)).shipments.map(shipmentJson), "");
    },

    async getShipment(ctx) {
      return {
        status: 200,
        body: shipmentJson(member((await orderOf(ctx)).shipments, ctx.params.shipment_id, "shipment")),
      };
    },

    async cancelOrder(ctx) {
      const res = await ctx.upstreams.orders.cancelOrder({ orderId: orderId(ctx) }, ctx.callOptions());
      return { status: 200, body: orderJson(res.order!) };
    },

    async addItem(ctx) {
      const res = await ctx.upstreams.orders.addItem(
        { orderId: orderId(ctx), item: toItem(ctx.body as ItemBody) },
        ctx.callOptions(),
      );
      const item = res.item!;
      return created(itemJson(item), `${ctx.base}/orders/${res.order!.id}/items/${item.id}`);
    },

    async listItems(ctx) {
      const res = await ctx.upstreams.orders.listItems({ orderId: orderId(ctx) }, ctx.callOptions());
      return listResult(ctx.path, undefined, res.items.map(itemJson), "");
    },

    async getItem(ctx) {
      return { status: 200, body: itemJson(member((await orderOf(ctx)).items, ctx.params.item_id, "item")) };
    },

    async addDiscount(ctx) {
      const body = ctx.body as { code: string; amount: number };
      const res = await ctx.upstreams.orders.addDiscount(
        { orderId: orderId(ctx), code: body.code, amount: BigInt(body.amount) },
        ctx.callOptions(),
      );
      const discount = res.discount!;
      return created(discountJson(discount), `${ctx.base}/orders/${res.order!.id}/discounts/${discount.id}`);
    },

    async listDiscounts(ctx) {
      const res = await ctx.upstreams.orders.listDiscounts({ orderId: orderId(ctx) }, ctx.callOptions());
      return listResult(ctx.path, undefined, res.discounts.map(discountJson), "");
    },

    async getDiscount(ctx) {
      return {
        status: 200,
        body: discountJson(member((await orderOf(ctx)).discounts, ctx.params.discount_id, "discount")),
      };
    },
  },
};
