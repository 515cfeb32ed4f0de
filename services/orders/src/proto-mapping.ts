// Internal records → proto messages, field by field; totals computed by the domain.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  DiscountSchema,
  ItemSchema,
  OrderSchema,
  OrderStatus as ProtoStatus,
  OrderStep,
  ShipmentSchema,
  type Discount,
  type Item,
  type Order,
  type Shipment,
} from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { totalsOf } from "./domain/orders.js";
import type { OrderStatus } from "./domain/state-machine.js";
import type { StepKind } from "./domain/steps.js";
import type { DiscountRecord, ItemRecord, OrderRecord, ShipmentRecord } from "./store/port.js";

export const STATUS_TO_PROTO: Record<OrderStatus, ProtoStatus> = {
  pending: ProtoStatus.PENDING,
  paid: ProtoStatus.PAID,
  shipped: ProtoStatus.SHIPPED,
  cancelled: ProtoStatus.CANCELLED,
};

const STEP_TO_PROTO: Record<StepKind, OrderStep> = { charge: OrderStep.PAYMENT, refund: OrderStep.CANCELLATION };

export const itemToProto = (i: ItemRecord): Item =>
  create(ItemSchema, {
    id: i.id,
    sku: i.sku,
    quantity: i.quantity,
    unitPrice: i.unitPrice,
    createTime: timestampFromDate(i.createdAt),
  });
export const discountToProto = (d: DiscountRecord): Discount =>
  create(DiscountSchema, { id: d.id, code: d.code, amount: d.amount, createTime: timestampFromDate(d.createdAt) });
export const shipmentToProto = (s: ShipmentRecord): Shipment =>
  create(ShipmentSchema, {
    id: s.id,
    orderId: s.orderId,
    carrier: s.carrier,
    trackingNumber: s.trackingNumber,
    createTime: timestampFromDate(s.createdAt),
  });

/**
 * An order's encoded size, never below it: its note and shipments' text in UTF-8, and room for each
 * item (~105 bytes at most: a 64-character sku, an id, quantity, price and time), each discount
 * (~100) and the order's own fields.
 */
export function orderBytes(o: OrderRecord): number {
  let bytes = 512 + Buffer.byteLength(o.note) + o.items.length * 128 + o.discounts.length * 128;
  for (const s of o.shipments) bytes += 128 + Buffer.byteLength(s.carrier) + Buffer.byteLength(s.trackingNumber);
  return bytes;
}

export function orderToProto(o: OrderRecord): Order {
  const totals = totalsOf(o.items, o.discounts);
  return create(OrderSchema, {
    id: o.id,
    userId: o.userId,
    status: STATUS_TO_PROTO[o.status],
    currency: o.currency,
    items: o.items.map(itemToProto),
    discounts: o.discounts.map(discountToProto),
    subtotal: totals.subtotal,
    discountTotal: totals.discountTotal,
    total: totals.total,
    note: o.note,
    paymentId: o.paymentId,
    refundId: o.refundId,
    shipments: o.shipments.map(shipmentToProto),
    stepInProgress: o.stepInProgress ? STEP_TO_PROTO[o.stepInProgress] : OrderStep.UNSPECIFIED,
    createTime: timestampFromDate(o.createdAt),
    updateTime: timestampFromDate(o.updatedAt),
  });
}
