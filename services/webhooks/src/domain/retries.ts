// When a failed delivery is tried again: exponential back-off (30 s, 1 min, 2 min, … at most 6 h
// apart) with jitter — each wait drawn between half and all of its step, so that deliveries failing
// together do not come back together — for up to 3 days after the first attempt; then the delivery
// has failed. An endpoint whose deliveries have all failed for 3 days is disabled. The schedule is a
// value (the operator's settings, which the tests compress), the defaults those of issue 45.
export interface RetrySchedule {
  /** The first wait's step; each later one doubles. */
  readonly firstRetryMs: number;
  /** The longest step. */
  readonly longestWaitMs: number;
  /** How long after its first attempt a delivery is given up, and an endpoint delivering nothing disabled. */
  readonly giveUpAfterMs: number;
}

export const FIRST_RETRY_MS = 30_000;
export const LONGEST_WAIT_MS = 6 * 3_600_000;
export const GIVE_UP_AFTER_MS = 3 * 24 * 3_600_000;
export const RETRY_SCHEDULE: RetrySchedule = {
  firstRetryMs: FIRST_RETRY_MS,
  longestWaitMs: LONGEST_WAIT_MS,
  giveUpAfterMs: GIVE_UP_AFTER_MS,
};

/** The step of the wait after `attempts` failed attempts (its jittered wait is between half and all of it). */
export function retryStep(attempts: number, schedule: RetrySchedule = RETRY_SCHEDULE): number {
  return Math.min(schedule.longestWaitMs, schedule.firstRetryMs * 2 ** Math.max(0, attempts - 1));
}

/**
 * When attempt `attempts + 1` is due, after `attempts` failed ones, the first at `firstAttemptAt`;
 * undefined when it would fall past the give-up period (the delivery has failed). `random` is in [0, 1).
 */
export function nextAttemptAt(
  firstAttemptAt: Date,
  lastAttemptAt: Date,
  attempts: number,
  { random = Math.random, schedule = RETRY_SCHEDULE }: { random?: () => number; schedule?: RetrySchedule } = {},
): Date | undefined {
  const step = retryStep(attempts, schedule);
  const wait = step / 2 + random() * (step / 2);
  const at = lastAttemptAt.getTime() + wait;
  return at - firstAttemptAt.getTime() > schedule.giveUpAfterMs ? undefined : new Date(at);
}
