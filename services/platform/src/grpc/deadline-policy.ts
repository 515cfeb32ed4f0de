// How long a call may run on this server, whatever its caller asked: a call sent without a deadline
// gets a default one, and a deadline past the ceiling is cut to it — for calls that answer once
// (unary, client streaming). Streams that answer as they go (the live feed, TrackOrders) are long by
// design: they have no deadline of the server's and end with their credential (authentication.ts).
import type { DescMethod } from "@bufbuild/protobuf";

export interface DeadlineLimits {
  /** The deadline of a call sent without one (at most maxMs). */
  defaultMs: number;
  /** The longest deadline a call may ask for. */
  maxMs: number;
}

/** Whether the server's deadline limits apply to the method: those that answer once. */
export const answersOnce = (method: DescMethod): boolean =>
  method.methodKind === "unary" || method.methodKind === "client_streaming";

/**
 * The deadline (ms since the epoch) the server holds a call to: the caller's (not finite: none),
 * cut to the ceiling, or the default when it sent none.
 */
export function deadlineWithin(asked: number, limits: DeadlineLimits, now: number): number {
  const ceiling = now + limits.maxMs;
  if (!Number.isFinite(asked)) return Math.min(now + limits.defaultMs, ceiling);
  return Math.min(asked, ceiling);
}
