// Internal records → proto messages, field by field.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  PaymentSchema,
  PaymentStatus,
  RefundSchema,
  type Payment,
  type Refund,
} from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { paymentStatus } from "./domain/payments.js";
import type { PaymentRecord, RefundRecord } from "./store/port.js";

const STATUS = {
  succeeded: PaymentStatus.SUCCEEDED,
  partially_refunded: PaymentStatus.PARTIALLY_REFUNDED,
  refunded: PaymentStatus.REFUNDED,
} as const;

export function paymentToProto(p: PaymentRecord): Payment {
  return create(PaymentSchema, {
    id: p.id,
    amount: p.amount,
    currency: p.currency,
    source: p.source,
    status: STATUS[paymentStatus(p.amount, p.amountRefunded)],
    amountRefunded: p.amountRefunded,
    // A result replayed from before owners existed has none.
    ownerUserId: p.ownerUserId ?? 0n,
    reference: p.reference ?? "",
    createTime: timestampFromDate(p.createdAt),
  });
}

export function refundToProto(r: RefundRecord): Refund {
  return create(RefundSchema, {
    id: r.id,
    paymentId: r.paymentId,
    amount: r.amount,
    currency: r.currency,
    reason: r.reason,
    createTime: timestampFromDate(r.createdAt),
  });
}
