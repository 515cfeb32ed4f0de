// When a failed delivery is tried again: exponential back-off (30 s, 1 min, 2 min, … at most 6 h
// apart) with jitter — each wait drawn between half and all of its step, so that deliveries failing
// together do not come back together — for up to 3 days after the first attempt; then the delivery
// has failed. An endpoint whose deliveries have all failed for 3 days is disabled.
export const FIRST_RETRY_MS = 30_000;
export const LONGEST_WAIT_MS = 6 * 3_600_000;
export const GIVE_UP_AFTER_MS = 3 * 24 * 3_600_000;

/**
 * When attempt `attempts + 1` is due, after `attempts` failed ones, the first at `firstAttemptAt`;
 * undefined when it would fall past the 3 days (the delivery has failed). `random` is in [0, 1).
 */
export function nextAttemptAt(
  firstAttemptAt: Date,
  lastAttemptAt: Date,
  attempts: number,
  random: () => number = Math.random,
): Date | undefined {
  const step = Math.min(LONGEST_WAIT_MS, FIRST_RETRY_MS * 2 ** Math.max(0, attempts - 1));
  const wait = step / 2 + random() * (step / 2);
  const at = lastAttemptAt.getTime() + wait;
  return at - firstAttemptAt.getTime() > GIVE_UP_AFTER_MS ? undefined : new Date(at);
}
