// What a piece of work belongs to, wherever in a call's async chain it runs (AsyncLocalStorage): the
// call's deadline — the store reads it to give its statements no more time than the caller has — its
// request id, which log lines carry and outgoing calls pass on, and its priority, passed on too.
import { AsyncLocalStorage } from "node:async_hooks";
import type { Priority } from "./priority.js";

export interface CallScope {
  /** ms since the epoch; undefined (or not finite): no deadline. */
  deadlineAt: number | undefined;
  requestId: string | undefined;
  priority?: Priority | undefined;
}

const scopes = new AsyncLocalStorage<CallScope>();

/** Runs `work` as part of a call that must be done by `deadlineAt` (ms since the epoch); undefined: no deadline. */
export function withCallDeadline<T>(deadlineAt: number | undefined, work: () => T): T {
  return withCallScope({ deadlineAt, requestId: undefined }, work);
}

/** Runs `work` as part of a call with this deadline, request id and priority (each undefined: none). */
export function withCallScope<T>({ deadlineAt, requestId, priority }: CallScope, work: () => T): T {
  const finite = deadlineAt !== undefined && Number.isFinite(deadlineAt) ? deadlineAt : undefined;
  if (finite === undefined && requestId === undefined && priority === undefined) return work();
  return scopes.run({ deadlineAt: finite, requestId, priority }, work);
}

/** What is left of the current call's time (ms; may be ≤ 0), or undefined outside a call with a deadline. */
export function remainingCallMs(now = Date.now()): number | undefined {
  const deadlineAt = scopes.getStore()?.deadlineAt;
  return deadlineAt === undefined ? undefined : deadlineAt - now;
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

export function downstreamTimeoutMs(remainingMs: number | undefined): number | undefined {
  if (remainingMs === undefined) return undefined;
  return Math.max(0, Math.floor(remainingMs - Math.min(DOWNSTREAM_MARGIN_MS, remainingMs / 5)));
}

/** The request id of the call this work belongs to, if any. */
export function currentRequestId(): string | undefined {
  return scopes.getStore()?.requestId;
}

/** The priority of the call this work belongs to, if any. */
export function currentPriority(): Priority | undefined {
  return scopes.getStore()?.priority;
}
