// What the payments service needs from storage.
import type { IdempotentOutcome, Keyset } from "@switchyard/platform";
import type { NewPayment } from "../domain/payments.js";

export interface PaymentRecord {
  id: string;
  tenantId: string;
  amount: bigint;
  currency: string;
  source: string;
  amountRefunded: bigint;
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

export interface IdempotencyInput {
  key: string;
  requestHash: string;
}

export interface PaymentsStore {
  /** Creates the payment once per (tenant, key); a retry gets the first payment back, replayed. */
  createPayment(tenantId: string, idempotency: IdempotencyInput, payment: NewPayment): Promise<IdempotentOutcome<PaymentRecord>>;
  getPayment(tenantId: string, id: string): Promise<PaymentRecord | undefined>;
  listPayments(tenantId: string, after: Keyset | undefined, limit: number): Promise<PaymentRecord[]>;
  /**
   * Creates a refund once per (tenant, key), under a lock on the payment so that concurrent
   * refunds never exceed it; `check` sees the locked payment and throws to refuse.
   */
  createRefund(
    tenantId: string,
    idempotency: IdempotencyInput,
    refund: { paymentId: string; amount: bigint; reason: string },
    check: (payment: PaymentRecord) => void,
  ): Promise<IdempotentOutcome<RefundRecord>>;
  getRefund(tenantId: string, paymentId: string, refundId: string): Promise<RefundRecord | undefined>;
  listRefunds(tenantId: string, paymentId: string, after: Keyset | undefined, limit: number): Promise<RefundRecord[]>;
}
