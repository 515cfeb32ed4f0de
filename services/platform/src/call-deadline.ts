// The deadline of the call a piece of work belongs to, wherever in that call's async chain it runs
// (AsyncLocalStorage): the store reads it to give its statements no more time than the caller has.
import { AsyncLocalStorage } from "node:async_hooks";

const deadlines = new AsyncLocalStorage<number>();

/** Runs `work` as part of a call that must be done by `deadlineAt` (ms since the epoch); undefined: no deadline. */
export function withCallDeadline<T>(deadlineAt: number | undefined, work: () => T): T {
  return deadlineAt === undefined || !Number.isFinite(deadlineAt) ? work() : deadlines.run(deadlineAt, work);
}

/** What is left of the current call's time (ms; may be ≤ 0), or undefined outside a call with a deadline. */
export function remainingCallMs(now = Date.now()): number | undefined {
  const deadlineAt = deadlines.getStore();
  return deadlineAt === undefined ? undefined : deadlineAt - now;
}
