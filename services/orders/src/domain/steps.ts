// The money steps of an order, without I/O: a charge (pay) or a refund (cancel of a paid order) is
// recorded as an intent — step, amount, idempotency key — before payments is called, and its
// outcome after; how long a step may stay unsettled. (What a failed call to payments tells about the
// money is the workflow's: workflow/call-outcome.ts.)
import { DomainError } from "@switchyard/platform/domain-error.js";
import { derivedIdempotencyKey } from "@switchyard/platform/idempotency-keys.js";

export type StepKind = "charge" | "refund";
export type StepState = "pending" | "succeeded" | "failed";

/** How the public representation names a step in progress. */
export const STEP_NAMES: Record<StepKind, string> = { charge: "payment", refund: "cancellation" };

/** Without a deadline from the caller, a call to payments gets this long. */
export const DEFAULT_STEP_CALL_MS = 10_000;
/** A step's deadline is its call's deadline plus this: time to record the outcome the call brought. */
export const STEP_DEADLINE_SLACK_MS = 1_000;

/**
 * The key a step's call to payments carries: from the order and the step's attempt number under
 * orders' own secret — never from anything a client can change or predict — so a retried call can
 * never charge or refund twice, a new attempt (after one that did nothing) is a new key, and nobody
 * can make a payment under a key before orders does. (It lives in orders' own key scope at payments too.)
 */
export function stepIdempotencyKey(secret: Uint8Array, step: StepAttempt): string {
  return derivedIdempotencyKey(secret, step.tenantId, "order-step", step.orderId, step.kind, step.attempt);
}

/** One attempt at a step of an order: what its key is derived from. */
export interface StepAttempt {
  tenantId: string;
  orderId: bigint;
  kind: StepKind;
  attempt: number;
}

/** What a step is for, on the payment it makes (Payment.reference). */
export const orderReference = (orderId: bigint) => `order:${orderId}`;

/**
 * What differs between the payment payments answered and the charge the step asked for — amount,
 * currency, reference `order:<id>`, owner — or undefined when it is the step's. Only then is it believed.
 */
export function chargeMismatch(
  step: { orderId: bigint; amount: bigint; currency: string },
  orderOwner: bigint,
  payment: { amount: bigint; currency: string; reference: string; ownerUserId: bigint },
): string | undefined {
  return differences([
    ["amount", payment.amount === step.amount],
    ["currency", payment.currency === step.currency],
    ["reference", payment.reference === orderReference(step.orderId)],
    ["owner", payment.ownerUserId === orderOwner],
  ]);
}

/**
 * Likewise for a refund: of the step's payment, in its currency, of at most the step's amount (what
 * was left of the charge: an admin may have refunded part of it before).
 */
export function refundMismatch(
  step: { paymentId: string; amount: bigint; currency: string },
  refund: { paymentId: string; amount: bigint; currency: string },
): string | undefined {
  return differences([
    ["payment", refund.paymentId === step.paymentId],
    ["currency", refund.currency === step.currency],
    ["amount", refund.amount > 0n && refund.amount <= step.amount],
  ]);
}

function differences(checks: [string, boolean][]): string | undefined {
  const differing = checks.filter(([, same]) => !same).map(([name]) => name);
  return differing.length > 0 ? differing.join(", ") : undefined;
}

/** While a step is unsettled the order takes no edit, no other action, no second pay or cancel. */
export function guardNoStepInProgress(order: { stepInProgress: StepKind | undefined }): void {
  if (order.stepInProgress) {
    const step = STEP_NAMES[order.stepInProgress];
    throw new DomainError(
      "STEP_IN_PROGRESS",
      `the order's ${step} is still being settled with payments; read the order again in a few seconds`,
      { step },
    );
  }
}

/** How long the call to payments may take: the caller's remaining time, or the default. */
export function stepCallMs(remainingMs: number | undefined): number {
  return Math.max(0, Math.min(remainingMs ?? DEFAULT_STEP_CALL_MS, DEFAULT_STEP_CALL_MS));
}
