// Who may do what with payments, without I/O. The tenant is always the token's; within it a member
// sees and owns only their own payments, an admin sees every payment and alone refunds. The orders
// service, presenting its own token, acts for an order's owner: it charges on the owner's behalf,
// refunds a cancelled order and settles keys whose outcome it never saw.
import { DomainError } from "@switchyard/platform/domain-error.js";
import { requireRole, type Caller } from "@switchyard/platform/caller.js";

/** The internal service whose workflows (pay, cancel, the reconciler) move money for orders. */
export const ORDER_WORKFLOW_SERVICE = "orders";

export const REFERENCE_MAX_LENGTH = 100;

const actsForOrders = (caller: Caller) => caller.service === ORDER_WORKFLOW_SERVICE;

/** A payment another member owns is as absent as one that does not exist (no existence leak). */
export function canSeePayment(caller: Caller, payment: { ownerUserId: bigint }): boolean {
  return caller.role === "admin" || payment.ownerUserId === caller.userId;
}

/** The payment, if the caller may see it; else 404 (another member's payment is as absent as a made-up id). */
export function visiblePayment<T extends { ownerUserId: bigint }>(caller: Caller, payment: T | undefined): T {
  if (!payment || !canSeePayment(caller, payment)) throw new DomainError("NOT_FOUND", "payment not found");
  return payment;
}

/** Members list only their own payments; undefined: every payment of the tenant. */
export function listedOwner(caller: Caller): bigint | undefined {
  return caller.role === "admin" ? undefined : caller.userId;
}

/** The owner of a new payment: the caller, or (admin or the orders workflow) the user it names. */
export function ownerOfNewPayment(caller: Caller, requested: bigint): bigint {
  if (requested === 0n || requested === caller.userId) return caller.userId;
  if (requested < 0n) throw new DomainError("INVALID_REQUEST", "owner_user_id must be a positive integer");
  if (caller.role !== "admin" && !actsForOrders(caller))
    throw new DomainError("ROLE_REQUIRED", "only an admin may make a payment for another user");
  return requested;
}

/** What a payment is for is written by the internal service that made it, never by a client. */
export function validateReference(caller: Caller, reference: string): string {
  if (reference === "") return reference;
  if (!actsForOrders(caller)) throw new DomainError("ROLE_REQUIRED", "reference is set by the orders workflow only");
  if (reference.length > REFERENCE_MAX_LENGTH || !/^[\x21-\x7e]+$/.test(reference))
    throw new DomainError("RULE_VIOLATION", `reference must be 1 to ${REFERENCE_MAX_LENGTH} visible ASCII characters`, {
      field: "reference",
    });
  return reference;
}

/**
 * Refunds are the admins' — and the orders workflow's, for an order being cancelled, which alone
 * refunds "whatever is left" (refund_remaining): an admin names the amount.
 */
export function requireRefundPermission(caller: Caller, refundRemaining = false): void {
  if (actsForOrders(caller)) return;
  if (refundRemaining)
    throw new DomainError(
      "ROLE_REQUIRED",
      "refund_remaining is for refunds on behalf of an order (the orders service)",
    );
  requireRole(caller, "admin");
}

/**
 * Keys stored before keys had principals (they age out with the key TTL): the orders workflow's are
 * those of an order's payment, and the voided ones (only it voids keys); a user's, those of a payment
 * made without a reference that the user may see — as such keys replayed before.
 */
export function ownsUnscopedPayment(
  caller: Caller | { service: string },
  payment: { ownerUserId: bigint; reference: string } | undefined,
): boolean {
  if (caller.service === ORDER_WORKFLOW_SERVICE) return payment === undefined || payment.reference.startsWith("order:");
  return "userId" in caller && payment !== undefined && payment.reference === "" && canSeePayment(caller, payment);
}

/** Likewise for refunds, which only admins and the orders workflow make: the workflow's voided keys are its own. */
export function ownsUnscopedRefund(caller: Caller | { service: string }, refund: object | undefined): boolean {
  return refund !== undefined || caller.service === ORDER_WORKFLOW_SERVICE;
}
