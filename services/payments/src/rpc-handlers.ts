// PaymentService RPC handlers: proto in, proto out. The tenant comes from the verified token only
// (or, for an internal service settling a key, from the request it is trusted to make).
import type { ServiceImpl } from "@connectrpc/connect";
import { KeyedOperation, PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { fail } from "@switchyard/platform/errors.js";
import { principalOf, servicePrincipal, type Caller } from "@switchyard/platform/caller.js";
import {
  authentication,
  callerOf,
  callScopeOf,
  idempotencyKeys,
  serviceCallerOf,
  USERS,
} from "@switchyard/platform/grpc";
import type { Authenticator, CallPolicy, ServiceInterceptor } from "@switchyard/platform/grpc";
import { Faults } from "@switchyard/platform/faults.js";
import { requestFingerprint } from "@switchyard/platform/idempotency-keys.js";
import { isIdOf } from "@switchyard/platform/ids.js";
import { decodeCursor, pageOf, pageSizeOf } from "@switchyard/platform/paging.js";
import {
  listedOwner,
  ORDER_WORKFLOW_SERVICE,
  ownerOfNewPayment,
  ownsUnscopedPayment,
  ownsUnscopedRefund,
  requireRefundPermission,
  validateReference,
  visiblePayment,
} from "./domain/access.js";
import { refundAmount, validateNewPayment, validateRefundRequest } from "./domain/payments.js";
import { paymentToProto, refundToProto } from "./proto-mapping.js";
import type { PaymentRecord, PaymentsStore, RefundRecord } from "./store/port.js";

export interface PaymentsDeps {
  store: PaymentsStore;
  faults?: Faults;
}

/**
 * Who may call payments. Users, for their own money (domain/access.ts decides within the tenant);
 * the orders workflow (its certificate, or its own token) acting for an order — charging its owner
 * with a reference, refunding a cancelled order's rest — and alone settling its keys. Any other
 * service's word is not taken: on a user's call it counts for nothing.
 */
export const paymentsCallPolicy: CallPolicy<typeof PaymentService> = {
  createPayment: { users: true, services: [ORDER_WORKFLOW_SERVICE] },
  getPayment: USERS,
  listPayments: USERS,
  createRefund: { users: true, services: [ORDER_WORKFLOW_SERVICE] },
  getRefund: USERS,
  listRefunds: USERS,
  resolveIdempotencyKey: { services: [ORDER_WORKFLOW_SERVICE] },
};

/**
 * What every call to payments goes through before its handler, besides the server's own steps: its
 * caller, as the call policy says; then the key of every method that makes or settles money (a UUID).
 */
export const paymentsInterceptors = (authenticator: Authenticator): ServiceInterceptor[] => [
  authentication<typeof PaymentService>({ authenticator, access: paymentsCallPolicy }),
  idempotencyKeys<typeof PaymentService>({
    createPayment: "required",
    createRefund: "required",
    resolveIdempotencyKey: "required",
  }),
];

/** The fault points of this service (FAULTS, tests only): a stall before a charge or refund commits, or after. */
export const PAYMENTS_FAULT_POINTS = ["payments.hold-before-commit", "payments.hold-after-commit"] as const;

const TENANT_ID = /^[a-z0-9][a-z0-9-]{0,62}$/;

function paymentIdOf(raw: string): string {
  if (!isIdOf("pay", raw)) throw fail("NOT_FOUND", "payment not found");
  return raw;
}

const keyOf = (r: { createdAt: Date; id: string }) => ({ createdAt: r.createdAt, id: r.id });

export function paymentHandlers({ store, faults = new Faults() }: PaymentsDeps): ServiceImpl<typeof PaymentService> {
  /**
   * A payment the caller may see, or 404 (an id that cannot be one throws at once). A plain promise
   * chain, as the store's read and getPayment: each async function layer of the service's hottest
   * read costs a promise more.
   */
  function loadPayment(caller: Caller, rawId: string): Promise<PaymentRecord> {
    return store.getPayment(caller.tenantId, paymentIdOf(rawId)).then((payment) => visiblePayment(caller, payment));
  }

  /** A money write, with the test-only stalls around its commit. */
  async function committing<T>(write: () => Promise<T>): Promise<T> {
    await faults.holdIfFires("payments.hold-before-commit");
    const result = await write();
    await faults.holdIfFires("payments.hold-after-commit");
    return result;
  }

  return {
    async createPayment(req, ctx) {
      const caller = callerOf(ctx);
      const payment = validateNewPayment({
        amount: req.amount,
        currency: req.currency,
        source: req.source,
        ownerUserId: ownerOfNewPayment(caller, req.ownerUserId),
        reference: validateReference(caller, req.reference),
      });
      // Owner and reference count only when they are not the defaults: keys stored before they existed still replay.
      const requestHash = requestFingerprint({
        amount: payment.amount,
        currency: payment.currency,
        source: payment.source,
        ...(payment.ownerUserId === caller.userId ? {} : { owner: payment.ownerUserId }),
        ...(payment.reference === "" ? {} : { reference: payment.reference }),
      });
      // The key is the caller's own (principalOf): another principal's key, however it was learnt, is another key.
      const key = {
        principal: principalOf(caller),
        key: req.idempotencyKey,
        requestHash,
        ownsUnscoped: (p: PaymentRecord | undefined) => ownsUnscopedPayment(caller, p),
        call: callScopeOf(ctx),
      };
      const outcome = await committing(() => store.createPayment(caller.tenantId, key, payment));
      return { payment: paymentToProto(outcome.result), replayed: outcome.replayed };
    },

    getPayment(req, ctx) {
      return loadPayment(callerOf(ctx), req.paymentId).then((payment) => ({ payment: paymentToProto(payment) }));
    },

    async listPayments(req, ctx) {
      const caller = callerOf(ctx);
      const size = pageSizeOf(req.pageSize);
      const owner = listedOwner(caller);
      // A member's list is another list than the tenant's: a cursor of one is refused by the other.
      const collection = owner === undefined ? `payments:${caller.tenantId}` : `payments:${caller.tenantId}:${owner}`;
      const rows = await store.listPayments(caller.tenantId, owner, decodeCursor(collection, req.pageToken), size + 1);
      const page = pageOf(rows, size, { collection, keyOf });
      return { payments: page.items.map(paymentToProto), nextPageToken: page.nextCursor };
    },

    async createRefund(req, ctx) {
      const caller = callerOf(ctx);
      requireRefundPermission(caller, req.refundRemaining);
      const paymentId = paymentIdOf(req.paymentId);
      const refund = validateRefundRequest({
        amount: req.amount,
        reason: req.reason,
        refundRemaining: req.refundRemaining,
      });
      const requestHash = requestFingerprint({
        paymentId,
        amount: refund.amount ?? "remaining",
        reason: refund.reason,
      });
      const key = {
        principal: principalOf(caller),
        key: req.idempotencyKey,
        requestHash,
        ownsUnscoped: (r: RefundRecord | undefined) => ownsUnscopedRefund(caller, r),
        call: callScopeOf(ctx),
      };
      const outcome = await committing(() =>
        store.createRefund(caller.tenantId, key, { paymentId, reason: refund.reason }, (payment) =>
          refundAmount(payment, refund.amount),
        ),
      );
      return { refund: refundToProto(outcome.result), replayed: outcome.replayed };
    },

    async getRefund(req, ctx) {
      const caller = callerOf(ctx);
      const payment = await loadPayment(caller, req.paymentId);
      const refund = isIdOf("re", req.refundId)
        ? await store.getRefund(caller.tenantId, payment.id, req.refundId)
        : undefined;
      if (!refund) throw fail("NOT_FOUND", "refund not found");
      return { refund: refundToProto(refund) };
    },

    async listRefunds(req, ctx) {
      const caller = callerOf(ctx);
      const payment = await loadPayment(caller, req.paymentId);
      const size = pageSizeOf(req.pageSize);
      const collection = `refunds:${caller.tenantId}:${payment.id}`;
      const rows = await store.listRefunds(
        caller.tenantId,
        payment.id,
        decodeCursor(collection, req.pageToken),
        size + 1,
      );
      const page = pageOf(rows, size, { collection, keyOf });
      return { refunds: page.items.map(refundToProto), nextPageToken: page.nextCursor };
    },

    async resolveIdempotencyKey(req, ctx) {
      // Only the orders workflow gets here (paymentsCallPolicy).
      const { service } = serviceCallerOf(ctx);
      if (!TENANT_ID.test(req.tenantId)) throw fail("INVALID_REQUEST", "tenant_id must be a tenant id");
      // Only the calling service's own keys: it learns nothing of anyone else's.
      const principal = servicePrincipal(service);
      switch (req.operation) {
        case KeyedOperation.CREATE_PAYMENT: {
          const found = await store.resolvePaymentKey(req.tenantId, {
            principal,
            key: req.idempotencyKey,
            ownsUnscoped: (p) => ownsUnscopedPayment({ service }, p),
            call: callScopeOf(ctx),
          });
          return {
            outcome:
              "voided" in found
                ? { case: "voided", value: true }
                : { case: "payment", value: paymentToProto(found.result) },
          };
        }
        case KeyedOperation.CREATE_REFUND: {
          const found = await store.resolveRefundKey(req.tenantId, {
            principal,
            key: req.idempotencyKey,
            ownsUnscoped: (r) => ownsUnscopedRefund({ service }, r),
            call: callScopeOf(ctx),
          });
          return {
            outcome:
              "voided" in found
                ? { case: "voided", value: true }
                : { case: "refund", value: refundToProto(found.result) },
          };
        }
        default:
          throw fail("INVALID_REQUEST", "operation must be CREATE_PAYMENT or CREATE_REFUND");
      }
    },
  };
}
