// Payment and refund rules, without I/O.
import { DomainError } from "@switchyard/platform/domain-error.js";
import { assertAmount, assertCurrency } from "@switchyard/platform/money.js";

export type PaymentStatus = "succeeded" | "partially_refunded" | "refunded";

export const SOURCE_MAX_LENGTH = 255;
export const REASON_MAX_LENGTH = 500;

const CONTROL = /\p{Cc}/u;

export interface NewPayment {
  amount: bigint;
  currency: string;
  source: string;
  ownerUserId: bigint;
  reference: string;
}

export function validateNewPayment(input: NewPayment): NewPayment {
  assertAmount(input.amount, "amount");
  assertCurrency(input.currency);
  if (input.source.length === 0 || input.source.length > SOURCE_MAX_LENGTH || CONTROL.test(input.source)) {
    throw new DomainError(
      "RULE_VIOLATION",
      `source must be 1 to ${SOURCE_MAX_LENGTH} characters without control characters`,
      { field: "source" },
    );
  }
  return input;
}

export interface RefundRequest {
  /** Undefined: whatever is not refunded yet. */
  amount: bigint | undefined;
  reason: string;
}

export function validateRefundRequest(input: {
  amount: bigint;
  reason: string;
  refundRemaining: boolean;
}): RefundRequest {
  if (input.refundRemaining) {
    if (input.amount !== 0n) throw new DomainError("INVALID_REQUEST", "amount must be 0 when refund_remaining is set");
  } else {
    assertAmount(input.amount, "amount");
  }
  if (input.reason.length > REASON_MAX_LENGTH || CONTROL.test(input.reason)) {
    throw new DomainError(
      "RULE_VIOLATION",
      `reason must be at most ${REASON_MAX_LENGTH} characters without control characters`,
      { field: "reason" },
    );
  }
  return { amount: input.refundRemaining ? undefined : input.amount, reason: input.reason };
}

export function paymentStatus(amount: bigint, refunded: bigint): PaymentStatus {
  if (refunded === 0n) return "succeeded";
  return refunded < amount ? "partially_refunded" : "refunded";
}

/** The amount to refund: the one asked for, at most what has not been refunded yet — or all of that. */
export function refundAmount(
  payment: { amount: bigint; amountRefunded: bigint },
  requested: bigint | undefined,
): bigint {
  const rest = payment.amount - payment.amountRefunded;
  if (requested === undefined) {
    if (rest === 0n) throw new DomainError("NOTHING_TO_REFUND", "the payment is refunded in full already");
    return rest;
  }
  if (requested > rest) {
    throw new DomainError(
      "REFUND_EXCEEDS_REFUNDABLE",
      `the refund of ${requested} exceeds the refundable rest of ${rest}`,
      { refundable: rest.toString() },
    );
  }
  return requested;
}
