// Public representations of orders and what lies beneath them (the API's JSON): the gateway answers
// with them, and the webhooks service sends them as events' data.
import {
  OrderStatus,
  OrderStep,
  type Discount,
  type Item,
  type Order,
  type Shipment,
} from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { isoTime } from "./time.js";

const STATUS_NAMES: Record<OrderStatus, string> = {
  [OrderStatus.UNSPECIFIED]: "pending",
  [OrderStatus.PENDING]: "pending",
  [OrderStatus.PAID]: "paid",
  [OrderStatus.SHIPPED]: "shipped",
  [OrderStatus.CANCELLED]: "cancelled",
};

const STEP_NAMES: Record<OrderStep, string | null> = {
  [OrderStep.UNSPECIFIED]: null,
  [OrderStep.PAYMENT]: "payment",
  [OrderStep.CANCELLATION]: "cancellation",
};

const orNull = (s: string) => (s === "" ? null : s);

export function itemJson(i: Item) {
  return {
    id: Number(i.id),
    sku: i.sku,
    quantity: Number(i.quantity),
    unit_price: Number(i.unitPrice),
    created_at: isoTime(i.createTime),
  };
}

export function discountJson(d: Discount) {
  return { id: Number(d.id), code: d.code, amount: Number(d.amount), created_at: isoTime(d.createTime) };
}

export function shipmentJson(s: Shipment) {
  return {
    id: s.id,
    order_id: Number(s.orderId),
    carrier: orNull(s.carrier),
    tracking_number: orNull(s.trackingNumber),
    created_at: isoTime(s.createTime),
  };
}

export function orderJson(o: Order) {
  return {
    id: Number(o.id),
    user_id: Number(o.userId),
    status: STATUS_NAMES[o.status] ?? "pending",
    currency: o.currency,
    items: o.items.map(itemJson),
    discounts: o.discounts.map(discountJson),
    subtotal: Number(o.subtotal),
    discount_total: Number(o.discountTotal),
    total: Number(o.total),
    note: o.note,
    payment_id: orNull(o.paymentId),
    refund_id: orNull(o.refundId),
    shipments: o.shipments.map(shipmentJson),
    step_in_progress: STEP_NAMES[o.stepInProgress] ?? null,
    created_at: isoTime(o.createTime),
    updated_at: isoTime(o.updateTime),
  };
}
