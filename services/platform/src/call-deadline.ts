// What a call is bounded by and known as, handed explicitly to the work done for it (a handler
// gets it from its context: callScopeOf in grpc/handler-context.ts): its deadline — the store gives
// the call's transactions no more time than that — its request id, which the log lines about it
// carry and the calls it makes pass on, and its priority, passed on too. Explicit, not in an
// AsyncLocalStorage: on Node 20 one in use runs a hook for every promise and async resource of the
// process, measured at 7.5 µs of a payment read's ~110 in payments (docs/benchmarks.md).
import { PRIORITY_HEADER, type Priority } from "./priority.js";
import { REQUEST_ID_HEADER } from "./request-id.js";

export interface CallScope {
  /** ms since the epoch; undefined (or not finite): no deadline. */
  deadlineAt: number | undefined;
  requestId: string | undefined;
  priority?: Priority | undefined;
}

/** What is left of a call's time (ms; may be ≤ 0); undefined for work outside a call, or a call without a deadline. */
export function remainingMs(call: CallScope | undefined, now = Date.now()): number | undefined {
  const deadlineAt = call?.deadlineAt;
  return deadlineAt === undefined || !Number.isFinite(deadlineAt) ? undefined : deadlineAt - now;
}

/**
 * The metadata a call gives the calls it makes, beside their credentials: its request id, and its
 * priority unless it is the default (none sent means default).
 */
export function passedOn(call: CallScope | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  if (call?.requestId !== undefined) headers[REQUEST_ID_HEADER] = call.requestId;
  if (call?.priority !== undefined && call.priority !== "default") headers[PRIORITY_HEADER] = call.priority;
  return headers;
}

/**
 * The deadline a call gives the calls it makes: what it has left, less a margin to answer in. A
 * downstream call that cannot be made in time (its peer unreachable: it waits for a ready connection
 * until its deadline) then fails while the caller can still say so — 503, not the caller's own 504.
 * The margin: a fifth of what is left, at most DOWNSTREAM_MARGIN_MS. It must cover what the caller's
 * own clock does not see: the deadline travels as a duration (grpc-timeout), counted from when the
 * call arrived here, so the time it spent reaching this service — and this service's answer back —
 * come out of the margin; 100 ms was measured too little on a loaded 2-core machine.
 */
export const DOWNSTREAM_MARGIN_MS = 250;

export function downstreamTimeoutMs(leftMs: number | undefined): number | undefined {
  if (leftMs === undefined) return undefined;
  return Math.max(0, Math.floor(leftMs - Math.min(DOWNSTREAM_MARGIN_MS, leftMs / 5)));
}
