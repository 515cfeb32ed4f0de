// /v1/payments…: payments and refunds, translated to PaymentService calls.
import { created, type RouteGroup } from "../runtime/route.js";
import { cursorParam, listResult, pageSizeParam } from "../runtime/pagination.js";
import { paymentJson, refundJson } from "@switchyard/platform/representations/payments.js";

interface PaymentBody {
  amount: number;
  currency: string;
  source: string;
}
interface RefundBody {
  amount: number;
  reason?: string;
}

export const paymentRoutes: RouteGroup = {
  upstream: "payments",
  handlers: {
    async createPayment({ params, body, upstreams, callOptions, base }) {
      const input = body as PaymentBody;
      const res = await upstreams.payments.createPayment(
        {
          idempotencyKey: params["idempotency-key"] as string,
          amount: BigInt(input.amount),
          currency: input.currency,
          source: input.source,
        },
        callOptions(),
      );
      const payment = res.payment!;
      return created(paymentJson(payment), `${base}/payments/${payment.id}`, res.replayed);
    },

    async listPayments({ params, upstreams, callOptions, path }) {
      const res = await upstreams.payments.listPayments(
        { pageSize: pageSizeParam(params.limit), pageToken: cursorParam(params.cursor) },
        callOptions(),
      );
      return listResult(path, params.limit, res.payments.map(paymentJson), res.nextPageToken);
    },

    async getPayment({ params, upstreams, callOptions }) {
      const { payment } = await upstreams.payments.getPayment(
        { paymentId: params.payment_id as string },
        callOptions(),
      );
      return { status: 200, body: paymentJson(payment!) };
    },

    async createRefund({ params, body, upstreams, callOptions, base }) {
      const input = body as RefundBody;
      const paymentId = params.payment_id as string;
      const res = await upstreams.payments.createRefund(
        {
          idempotencyKey: params["idempotency-key"] as string,
          paymentId,
          amount: BigInt(input.amount),
          reason: input.reason ?? "",
        },
        callOptions(),
      );
      const refund = res.refund!;
      return created(refundJson(refund), `${base}/payments/${paymentId}/refunds/${refund.id}`, res.replayed);
    },

    async listRefunds({ params, upstreams, callOptions, path }) {
      const res = await upstreams.payments.listRefunds(
        {
          paymentId: params.payment_id as string,
          pageSize: pageSizeParam(params.limit),
          pageToken: cursorParam(params.cursor),
        },
        callOptions(),
      );
      return listResult(path, params.limit, res.refunds.map(refundJson), res.nextPageToken);
    },

    async getRefund({ params, upstreams, callOptions }) {
      const { refund } = await upstreams.payments.getRefund(
        { paymentId: params.payment_id as string, refundId: params.refund_id as string },
        callOptions(),
      );
      return { status: 200, body: refundJson(refund!) };
    },
  },
};
