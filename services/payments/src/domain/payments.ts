// Payment and refund rules, without I/O.
import { assertAmount, assertCurrency, fail } from "@switchyard/platform";

export type PaymentStatus = "succeeded" | "partially_refunded" | "refunded";

export const SOURCE_MAX_LENGTH = 255;
export const REASON_MAX_LENGTH = 500;

const CONTROL = /\p{Cc}/u;

export interface NewPayment {
  amount: bigint;
  currency: string;
  source: string;
}

export function validateNewPayment(input: NewPayment): NewPayment {
  assertAmount(input.amount, "amount");
  assertCurrency(input.currency);
  if (input.source.length === 0 || input.source.length > SOURCE_MAX_LENGTH || CONTROL.test(input.source)) {
    throw fail("RULE_VIOLATION", `source must be 1 to ${SOURCE_MAX_LENGTH} characters without control characters`, { field: "source" });
  }
  return input;
}

export function validateRefundRequest(input: { amount: bigint; reason: string }): { amount: bigint; reason: string } {
  assertAmount(input.amount, "amount");
  if (input.reason.length > REASON_MAX_LENGTH || CONTROL.test(input.reason)) {
    throw fail("RULE_VIOLATION", `reason must be at most ${REASON_MAX_LENGTH} characters without control characters`, { field: "reason" });
  }
  return input;
}

export function paymentStatus(amount: bigint, refunded: bigint): PaymentStatus {
  if (refunded === 0n) return "succeeded";
  return refunded < amount ? "partially_refunded" : "refunded";
}

/** A refund may take at most what has not been refunded yet. */
export function checkRefundable(payment: { amount: bigint; amountRefunded: bigint }, refund: bigint): void {
  const rest = payment.amount - payment.amountRefunded;
  if (refund > rest) {
    throw fail("REFUND_EXCEEDS_REFUNDABLE", `the refund of ${refund} exceeds the refundable rest of ${rest}`, { refundable: rest.toString() });
  }
}
