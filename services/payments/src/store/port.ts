// What the payments service needs from storage.
import type { IdempotentOutcome, KeyedRequest } from "@switchyard/platform/store";
import type { Keyset } from "@switchyard/platform/paging.js";
import type { NewPayment } from "../domain/payments.js";

export interface PaymentRecord {
  id: string;
  tenantId: string;
  amount: bigint;
  currency: string;
  source: string;
  amountRefunded: bigint;
  ownerUserId: bigint;
  reference: string;
  createdAt: Date;
}

export interface RefundRecord {
  id: string;
  tenantId: string;
  paymentId: string;
  amount: bigint;
  currency: string;
  reason: string;
  createdAt: Date;
}

export interface PaymentsStore {
  /** Creates the payment once per (tenant, principal, key); a retry gets the first payment back, replayed. */
  createPayment(
    tenantId: string,
    idempotency: KeyedRequest<PaymentRecord>,
    payment: NewPayment,
  ): Promise<IdempotentOutcome<PaymentRecord>>;
  getPayment(tenantId: string, id: string): Promise<PaymentRecord | undefined>;
  /** Newest first; only `owner`'s payments when given. */
  listPayments(
    tenantId: string,
    owner: bigint | undefined,
    after: Keyset | undefined,
    limit: number,
  ): Promise<PaymentRecord[]>;
  /**
   * Creates a refund once per (tenant, principal, key), under a lock on the payment so that concurrent
   * refunds never exceed it; `decide` sees the locked payment and returns the amount (or throws to refuse).
   */
  createRefund(
    tenantId: string,
    idempotency: KeyedRequest<RefundRecord>,
    refund: { paymentId: string; reason: string },
    decide: (payment: PaymentRecord) => bigint,
  ): Promise<IdempotentOutcome<RefundRecord>>;
  /** What was made under one of a principal's keys of this operation — or nothing, and then never (see resolveIdempotencyKey). */
  resolvePaymentKey(
    tenantId: string,
    key: Omit<KeyedRequest<PaymentRecord>, "requestHash">,
  ): Promise<{ result: PaymentRecord } | { voided: true }>;
  resolveRefundKey(
    tenantId: string,
    key: Omit<KeyedRequest<RefundRecord>, "requestHash">,
  ): Promise<{ result: RefundRecord } | { voided: true }>;
  getRefund(tenantId: string, paymentId: string, refundId: string): Promise<RefundRecord | undefined>;
  listRefunds(tenantId: string, paymentId: string, after: Keyset | undefined, limit: number): Promise<RefundRecord[]>;
}
