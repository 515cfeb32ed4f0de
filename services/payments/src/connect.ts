// PaymentService RPC handlers: proto in, proto out. The tenant comes from the verified token only.
import type { ServiceImpl } from "@connectrpc/connect";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { assertIdempotencyKey, decodeCursor, fail, isIdOf, pageOf, pageSizeOf, requestFingerprint, type TokenVerifier } from "@switchyard/platform";
import { checkRefundable, validateNewPayment, validateRefundRequest } from "./domain/payments.js";
import { paymentToProto, refundToProto } from "./proto-mapping.js";
import type { PaymentsStore } from "./store/port.js";

export interface PaymentsDeps {
  store: PaymentsStore;
  verifier: TokenVerifier;
}

function paymentIdOf(raw: string): string {
  if (!isIdOf("pay", raw)) throw fail("NOT_FOUND", "payment not found");
  return raw;
}

const keyOf = (r: { createdAt: Date; id: string }) => ({ createdAt: r.createdAt, id: r.id });

export function paymentHandlers({ store, verifier }: PaymentsDeps): ServiceImpl<typeof PaymentService> {
  return {
    async createPayment(req, ctx) {
      const caller = await verifier.authenticate(ctx);
      assertIdempotencyKey(req.idempotencyKey);
      const payment = validateNewPayment({ amount: req.amount, currency: req.currency, source: req.source });
      const requestHash = requestFingerprint({ amount: payment.amount, currency: payment.currency, source: payment.source });
      const outcome = await store.createPayment(caller.tenantId, { key: req.idempotencyKey, requestHash }, payment);
      return { payment: paymentToProto(outcome.result), replayed: outcome.replayed };
    },

    async getPayment(req, ctx) {
      const caller = await verifier.authenticate(ctx);
      const payment = await store.getPayment(caller.tenantId, paymentIdOf(req.paymentId));
      if (!payment) throw fail("NOT_FOUND", "payment not found");
      return { payment: paymentToProto(payment) };
    },

    async listPayments(req, ctx) {
      const caller = await verifier.authenticate(ctx);
      const size = pageSizeOf(req.pageSize);
      const collection = `payments:${caller.tenantId}`;
      const rows = await store.listPayments(caller.tenantId, decodeCursor(collection, req.pageToken), size + 1);
      const page = pageOf(rows, size, collection, keyOf);
      return { payments: page.items.map(paymentToProto), nextPageToken: page.nextCursor };
    },

    async createRefund(req, ctx) {
      const caller = await verifier.authenticate(ctx);
      assertIdempotencyKey(req.idempotencyKey);
      const paymentId = paymentIdOf(req.paymentId);
      const refund = validateRefundRequest({ amount: req.amount, reason: req.reason });
      const requestHash = requestFingerprint({ paymentId, amount: refund.amount, reason: refund.reason });
      const outcome = await store.createRefund(caller.tenantId, { key: req.idempotencyKey, requestHash }, { paymentId, ...refund }, (payment) => checkRefundable(payment, refund.amount));
      return { refund: refundToProto(outcome.result), replayed: outcome.replayed };
    },

    async getRefund(req, ctx) {
      const caller = await verifier.authenticate(ctx);
      const refund = isIdOf("re", req.refundId) ? await store.getRefund(caller.tenantId, paymentIdOf(req.paymentId), req.refundId) : undefined;
      if (!refund) throw fail("NOT_FOUND", "refund not found");
      return { refund: refundToProto(refund) };
    },

    async listRefunds(req, ctx) {
      const caller = await verifier.authenticate(ctx);
      const paymentId = paymentIdOf(req.paymentId);
      const size = pageSizeOf(req.pageSize);
      const collection = `refunds:${caller.tenantId}:${paymentId}`;
      const after = decodeCursor(collection, req.pageToken);
      const rows = await store.listRefunds(caller.tenantId, paymentId, after, size + 1);
      // An empty first page of an unknown payment is a 404, not an empty list.
      if (rows.length === 0 && !after && !(await store.getPayment(caller.tenantId, paymentId))) throw fail("NOT_FOUND", "payment not found");
      const page = pageOf(rows, size, collection, keyOf);
      return { refunds: page.items.map(refundToProto), nextPageToken: page.nextCursor };
    },
  };
}
