// Who may do what with orders, without I/O. Within the token's tenant, a member acts on their own
// orders only; another member's order is as absent as one that does not exist (404, never 403: no
// existence leak). An admin acts on every order of the tenant, and alone ships, discounts and reads
// another user's order list (403 for members, whatever the order).
import { DomainError } from "@switchyard/platform/domain-error.js";
import { requireRole, type Caller } from "@switchyard/platform/caller.js";

export function canSeeOrder(caller: Caller, order: { userId: bigint }): boolean {
  return caller.role === "admin" || order.userId === caller.userId;
}

/** The order, if the caller may see it; else 404. */
export function visibleOrder<T extends { userId: bigint }>(caller: Caller, order: T | undefined): T {
  if (!order || !canSeeOrder(caller, order)) throw new DomainError("NOT_FOUND", "order not found");
  return order;
}

/** Shipments and discounts are the tenant's admins' to make. */
export function requireOrderAdmin(caller: Caller): void {
  requireRole(caller, "admin");
}

/** One's own order list, or any user's for an admin. */
export function requireListOf(caller: Caller, userId: bigint): void {
  if (userId !== caller.userId && caller.role !== "admin")
    throw new DomainError("ROLE_REQUIRED", "only an admin may list another user's orders");
}
