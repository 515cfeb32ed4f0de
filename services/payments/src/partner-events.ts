// The events payments reports to partners (webhooks), each carrying the resource as it is after the
// change, as its proto message: the store records them in the transaction that makes the change.
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { PaymentSchema, RefundSchema } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import type { NewEvent, OutboxEvent } from "@switchyard/platform/store";
import type { EventResource } from "@switchyard/platform/webhook-relay.js";
import { paymentToProto, refundToProto } from "./proto-mapping.js";
import type { PaymentRecord, RefundRecord } from "./store/port.js";

export const paymentSucceeded = (p: PaymentRecord): NewEvent => ({
  type: "payment.succeeded",
  tenantId: p.tenantId,
  resource: toBinary(PaymentSchema, paymentToProto(p)),
});

export const refundSucceeded = (r: RefundRecord): NewEvent => ({
  type: "refund.succeeded",
  tenantId: r.tenantId,
  resource: toBinary(RefundSchema, refundToProto(r)),
});

/** An outbox event's resource, as recorded above: a refund for refund.*, else the payment. */
export function paymentResourceOf(event: OutboxEvent): EventResource {
  return event.type.startsWith("refund.")
    ? { case: "refund", value: fromBinary(RefundSchema, event.resource) }
    : { case: "payment", value: fromBinary(PaymentSchema, event.resource) };
}
