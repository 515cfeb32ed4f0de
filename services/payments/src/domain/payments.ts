// Payment and refund rules, without I/O.
import { fail } from "@switchyard/platform";

export type PaymentStatus = "succeeded" | "partially_refunded" | "refunded";

/** Largest amount accepted, in minor units: far below 2^53, so JSON numbers stay exact. */
export const MAX_AMOUNT = 100_000_000_000n;
export const SOURCE_MAX_LENGTH = 255;
export const REASON_MAX_LENGTH = 500;

const CURRENCIES = new Set(Intl.supportedValuesOf("currency"));
const CONTROL = /\p{Cc}/u;

export interface NewPayment {
  amount: bigint;
  currency: string;
  source: string;
}

function checkAmount(amount: bigint): void {
  if (amount < 1n || amount > MAX_AMOUNT) throw fail("RULE_VIOLATION", `amount must be a positive integer in minor units, at most ${MAX_AMOUNT}`, { field: "amount" });
}

export function validateNewPayment(input: NewPayment): NewPayment {
  checkAmount(input.amount);
  if (!/^[A-Z]{3}$/.test(input.currency) || !CURRENCIES.has(input.currency)) {
    throw fail("RULE_VIOLATION", "currency must be an upper-case ISO 4217 code such as EUR", { field: "currency" });
  }
  if (input.source.length === 0 || input.source.length > SOURCE_MAX_LENGTH || CONTROL.test(input.source)) {
    throw fail("RULE_VIOLATION", `source must be 1 to ${SOURCE_MAX_LENGTH} characters without control characters`, { field: "source" });
  }
  return input;
}

export function validateRefundRequest(input: { amount: bigint; reason: string }): { amount: bigint; reason: string } {
  checkAmount(input.amount);
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
