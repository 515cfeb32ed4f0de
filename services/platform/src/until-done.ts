// Work that must happen once the store answers again — reading what lost notifications announced —
// tried until it succeeds (its failures logged), with back-off, unless the caller stops first.
import type { Logger } from "./logger.js";

const FIRST_WAIT_MS = 100;
const MOST_WAIT_MS = 2_000;

export async function untilDone(
  work: () => Promise<void>,
  options: { logger: Logger; what: string; stopped?: () => boolean },
): Promise<void> {
  for (let wait = FIRST_WAIT_MS; !options.stopped?.(); wait = Math.min(wait * 2, MOST_WAIT_MS)) {
    try {
      await work();
      return;
    } catch (err) {
      options.logger.warn({ message: String(err), retryInMs: wait }, `could not ${options.what}; retrying`);
      await new Promise((resolve) => setTimeout(resolve, wait).unref());
    }
  }
}
