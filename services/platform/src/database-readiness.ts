// A service and its database server over time: at start it waits for the server (with back-off,
// saying so) instead of exiting — a restarted pod would only wait again — and while it runs, its
// readiness follows whether the server answers: NOT_SERVING once checks have failed for a stated
// time, so that a blip does not take every replica out of its Service, and SERVING again at the
// first check that passes. Liveness never follows the database: restarting the process cures nothing.
import { reasonOf } from "./errors.js";
import type { Logger } from "./logger.js";
import { reportDatabaseReachable } from "./metrics.js";
import type { SqlDatabase } from "./store/index.js";

/** The first wait between tries at start, doubling up to the second figure (a refused connection costs little). */
const START_RETRY_MS = 250;
const START_RETRY_MAX_MS = 1_000;
/** How often a running process checks its database; more often while the checks fail, to see it return at once. */
const CHECK_EVERY_MS = 2_000;
const CHECK_WHILE_FAILING_MS = 500;
/** A check that has not answered in this long failed (a server that hangs, a network that drops packets). */
const CHECK_TIMEOUT_MS = 2_000;

/** A failure of the database server, not of the request: worth waiting out. */
export function isStoreUnavailable(err: unknown): boolean {
  return reasonOf(err) === "STORE_UNAVAILABLE";
}

/**
 * Runs `open` until it succeeds, waiting between tries (250 ms, doubling to 1 s: a server back is found within a second) while the database
 * server cannot be reached; any other failure (a schema behind its migrations, a bad setting) ends
 * the wait at once. Logs the first failure and then every tenth, and the success after failures.
 */
/** Where the wait is told (a service's logger; the migration step's stderr). */
export interface DatabaseWaitLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

export async function waitForDatabase<T>(open: () => Promise<T>, log: DatabaseWaitLog): Promise<T> {
  let wait = START_RETRY_MS;
  const since = Date.now();
  for (let failures = 0; ; failures++) {
    try {
      const opened = await open();
      if (failures > 0) log.info({ waitedMs: Date.now() - since }, "the database is reachable");
      return opened;
    } catch (err) {
      if (!isStoreUnavailable(err)) throw err;
      if (failures % 10 === 0)
        log.warn(
          { retryInMs: wait, waitedMs: Date.now() - since },
          "waiting for the database: it cannot be reached yet",
        );
    }
    await new Promise((resolve) => setTimeout(resolve, wait));
    wait = Math.min(START_RETRY_MAX_MS, wait * 2);
  }
}

export interface DatabaseWatchOptions {
  /** How long checks must fail before the process is reported not ready (DATABASE_UNREADY_AFTER_MS). */
  unreadyAfterMs: number;
  /** Called with false when the process must leave its Service, with true when it may serve again. */
  onReadiness(ready: boolean): void;
  logger: Logger;
}

/** Checks the database while the process runs (a server's only: embedded storage cannot go away); returns the stop. */
export function watchDatabase(db: SqlDatabase, options: DatabaseWatchOptions): () => void {
  let reachable = true;
  const unreport = reportDatabaseReachable(() => reachable);
  if (db.engine !== "postgres") return unreport;
  let failingSince: number | undefined;
  let ready = true;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const check = async () => {
    let timeout: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        db.query("SELECT 1"),
        new Promise(
          (_, reject) => (timeout = setTimeout(() => reject(new Error("check timed out")), CHECK_TIMEOUT_MS)),
        ),
      ]);
      if (failingSince !== undefined)
        options.logger.info({ failedForMs: Date.now() - failingSince }, "the database answers again");
      failingSince = undefined;
      reachable = true;
      if (!ready) options.onReadiness((ready = true));
    } catch (err) {
      reachable = false;
      if (failingSince === undefined) {
        failingSince = Date.now();
        options.logger.warn(
          { message: err instanceof Error ? err.message : String(err), unreadyAfterMs: options.unreadyAfterMs },
          "the database does not answer: calls that need it answer STORE_UNAVAILABLE",
        );
      }
      if (ready && Date.now() - failingSince >= options.unreadyAfterMs) {
        options.logger.warn(
          { failedForMs: Date.now() - failingSince },
          "the database has not answered for a while: readiness NOT_SERVING until it does",
        );
        options.onReadiness((ready = false));
      }
    } finally {
      clearTimeout(timeout);
    }
    if (!stopped)
      timer = setTimeout(() => void check(), failingSince === undefined ? CHECK_EVERY_MS : CHECK_WHILE_FAILING_MS);
    timer?.unref();
  };
  timer = setTimeout(() => void check(), CHECK_EVERY_MS);
  timer.unref();
  return () => {
    stopped = true;
    clearTimeout(timer);
    unreport();
  };
}
