// The order state machine, in one place: pending → paid → shipped, and cancel from pending or paid.
// Every status change goes through an action here; the store applies it as a conditional write on
// the state this guard saw, so a concurrent change makes the write miss instead of doubling it.
import { DomainError } from "@switchyard/platform/domain-error.js";

export type OrderStatus = "pending" | "paid" | "shipped" | "cancelled";
export type OrderAction = "pay" | "ship" | "cancel";

export const TRANSITIONS: Record<OrderAction, { from: readonly OrderStatus[]; to: OrderStatus }> = {
  pay: { from: ["pending"], to: "paid" },
  ship: { from: ["paid"], to: "shipped" },
  cancel: { from: ["pending", "paid"], to: "cancelled" },
};

/** The next status, or a 409 that names the current state and what the action needs. */
export function guardTransition(action: OrderAction, current: OrderStatus): OrderStatus {
  const t = TRANSITIONS[action];
  if (!t.from.includes(current)) {
    throw new DomainError(
      "INVALID_STATE",
      `cannot ${action} an order that is ${current}: only ${t.from.join(" or ")} orders can be ${action === "pay" ? "paid" : action === "ship" ? "shipped" : "cancelled"}`,
      {
        current_status: current,
      },
    );
  }
  return t.to;
}

/** Items and discounts change only while the order is pending. */
export function guardContentsChange(current: OrderStatus): void {
  if (current !== "pending")
    throw new DomainError(
      "INVALID_STATE",
      `the order is ${current}: items and discounts change only while it is pending`,
      { current_status: current },
    );
}

/**
 * An update never writes the status: it names the actions instead. In the order's own terms, not a
 * public API's paths (which version's?): the gateway names the action resources on the version called.
 */
export function refuseStatusWrite(): never {
  throw new DomainError(
    "RULE_VIOLATION",
    `status cannot be written; it changes only through the order's actions (${Object.keys(TRANSITIONS).join(", ")}), each guarded by its current status`,
    { field: "status" },
  );
}
