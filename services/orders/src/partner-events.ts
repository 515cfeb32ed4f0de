// The events orders reports to partners (webhooks): a status change to paid, shipped or cancelled,
// carrying the order as it is after the change, as its proto message. The store records it in the
// transaction that changes the status.
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { OrderSchema } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import type { NewEvent, OutboxEvent } from "@switchyard/platform/store";
import type { EventResource } from "@switchyard/platform/webhook-relay.js";
import type { OrderStatus } from "./domain/state-machine.js";
import { orderToProto } from "./proto-mapping.js";
import type { OrderRecord } from "./store/port.js";

const EVENT_OF_STATUS: Record<OrderStatus, string | undefined> = {
  pending: undefined,
  paid: "order.paid",
  shipped: "order.shipped",
  cancelled: "order.cancelled",
};

/** The event an order that has just reached its status reports, if that status is reported. */
export function statusEventOf(order: OrderRecord): NewEvent | undefined {
  const type = EVENT_OF_STATUS[order.status];
  return type === undefined
    ? undefined
    : { type, tenantId: order.tenantId, resource: toBinary(OrderSchema, orderToProto(order)) };
}

/** An outbox event's resource, as recorded above: the order. */
export const orderResourceOf = (event: OutboxEvent): EventResource => ({
  case: "order",
  value: fromBinary(OrderSchema, event.resource),
});
