// Public representations of payments and refunds (the API's JSON): the gateway answers with them, and
// the webhooks service sends them as events' data.
import { PaymentStatus, type Payment, type Refund } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { isoTime } from "./time.js";

const STATUS_NAMES: Record<PaymentStatus, string> = {
  [PaymentStatus.UNSPECIFIED]: "succeeded",
  [PaymentStatus.SUCCEEDED]: "succeeded",
  [PaymentStatus.PARTIALLY_REFUNDED]: "partially_refunded",
  [PaymentStatus.REFUNDED]: "refunded",
};

export function paymentJson(p: Payment) {
  return {
    id: p.id,
    amount: Number(p.amount),
    currency: p.currency,
    source: p.source,
    status: STATUS_NAMES[p.status] ?? "succeeded",
    amount_refunded: Number(p.amountRefunded),
    // The user it belongs to (null for payments made before owners were recorded).
    user_id: p.ownerUserId === 0n ? null : Number(p.ownerUserId),
    reference: p.reference === "" ? null : p.reference,
    created_at: isoTime(p.createTime),
  };
}

export function refundJson(r: Refund) {
  return {
    id: r.id,
    payment_id: r.paymentId,
    amount: Number(r.amount),
    currency: r.currency,
    reason: r.reason === "" ? null : r.reason,
    created_at: isoTime(r.createTime),
  };
}
