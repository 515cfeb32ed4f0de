// The embedded engine: PGlite (a real PostgreSQL engine in WebAssembly), persisted under
// ./data/<service>, or in memory for tests. Statements go through PgliteSession (named prepared
// statements over the wire protocol, each run to its end synchronously); this adapter holds the
// engine's one lock around them.
import { mkdirSync } from "node:fs";
import { PGlite, types as pgliteTypes } from "@electric-sql/pglite";
import { reportPool } from "../metrics.js";
import {
  assertIdentifier,
  normalizeParams,
  parseInt8,
  TRANSACTION_ABORTED,
  type SqlDatabase,
  type SqlExecutor,
  type SqlResult,
} from "./engine.js";
import { translatingSync } from "./error-translation.js";
import { initialisedCluster, seedDataDir } from "./pglite-cluster.js";
import { PgliteSession, type StatementResult } from "./pglite-session.js";
import { measuredSync } from "./statement-telemetry.js";

/**
 * The embedded engine's memory. PGlite keeps PostgreSQL's defaults for a server of its own: 128 MB
 * of shared buffers, zeroed at start and so resident in every process. One service's data is small
 * and the OS caches its files, so 16 MB do; WASM memory never shrinks, so index builds are bounded too.
 */
export const PGLITE_SETTINGS = ["shared_buffers=16MB", "maintenance_work_mem=16MB"] as const;
// (Its WebAssembly runs on V8's baseline compiler in the mesh's processes: see scripts/mesh.ts.)

/** A lock for one engine: taken at once when free, else handed to each waiter in turn (first come, first served). */
class EngineLock {
  private held = false;
  private readonly waiters: (() => void)[] = [];

  /** Takes the lock if it is free; false when it is held (or promised to a waiter). */
  take(): boolean {
    if (this.held) return false;
    this.held = true;
    return true;
  }

  /** Resolves once the lock is this caller's. */
  waitForTurn(): Promise<void> {
    if (this.take()) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Hands the lock to the next waiter, or frees it. */
  release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.held = false;
  }
}

/**
 * PostgreSQL's autovacuum analyzes a table once the rows changed in it pass 50 + 10 % of its size,
 * and the statements prepared on it are planned again with what it found. PGlite runs no autovacuum:
 * a statement prepared while its table was nearly empty keeps the plan made for that (measured: the
 * payments list, prepared at start, sorted the whole table — 1 ms a list at 4,000 payments, 6 ms at
 * 25,000, until the list alone held payments' event loop past its shedding threshold). So this engine
 * analyzes on the same rule, counting the rows its own statements changed.
 */
const ANALYZE_THRESHOLD = 50;
const ANALYZE_SCALE = 0.1;

class PgliteDatabase implements SqlDatabase {
  readonly engine = "pglite";
  private readonly session: PgliteSession;
  /** Work holding the engine (0 or 1: it runs one thing at a time), and work waiting for it. */
  inUse = 0;
  waiting = 0;
  /** In the pool metrics until closed. */
  private readonly unreport = reportPool({ inUse: () => this.inUse, waiting: () => this.waiting });

  constructor(
    private readonly db: PGlite,
    readonly schema: string,
  ) {
    this.session = new PgliteSession(db);
  }

  // One lock, this adapter's own (it is the engine's only user): held by a whole BEGIN … COMMIT, or
  // by one statement outside a transaction, it keeps a statement from landing inside another caller's
  // transaction. A statement runs synchronously to its end (PgliteSession), so one outside a
  // transaction, with the lock free, takes and gives it back in the same turn: no promise but its
  // answer, no queue. PGlite's own locks are not taken (its close() waits for this one instead).
  private readonly lock = new EngineLock();
  /** Rows changed since the last ANALYZE, and (roughly) the rows there were then. */
  private changedSinceAnalyze = 0;
  private rowsAtAnalyze = 0;
  private analyzing = false;

  query<R>(sql: string, params?: unknown[]): Promise<SqlResult<R>> {
    return this.exclusive(() => this.statement<R>(sql, params));
  }

  exec(sql: string): Promise<void> {
    return this.exclusive(() => this.script(sql));
  }

  /** One statement under the lock: at once when it is free, else in turn. */
  private exclusive<T>(run: () => T): Promise<T> {
    if (this.lock.take()) {
      this.inUse++;
      try {
        return Promise.resolve(run());
      } catch (err) {
        return Promise.reject(err);
      } finally {
        this.inUse--;
        this.lock.release();
      }
    }
    return this.inTurn(async () => run());
  }

  /** Waits for the lock (counted as waiting), then holds it (counted as in use) while `work` runs. */
  private async inTurn<T>(work: () => Promise<T>): Promise<T> {
    this.waiting++;
    await this.lock.waitForTurn();
    this.waiting--;
    this.inUse++;
    try {
      return await work();
    } finally {
      this.inUse--;
      this.lock.release();
    }
  }

  /** One statement (the caller holds the lock). */
  private statement<R>(sql: string, params: unknown[] | undefined): StatementResult<R> {
    const result = measuredSync(sql, this.schema, () =>
      translatingSync(() => this.session.run<R>(sql, normalizeParams(params) ?? [])),
    );
    if (result.command !== "SELECT" && result.rowCount > 0) this.changed(result.rowCount);
    return result;
  }

  /** Counts changed rows; past autovacuum's threshold, an ANALYZE runs once the current work is done. */
  private changed(rows: number): void {
    this.changedSinceAnalyze += rows;
    if (this.analyzing || this.changedSinceAnalyze < ANALYZE_THRESHOLD + ANALYZE_SCALE * this.rowsAtAnalyze) return;
    this.analyzing = true;
    setImmediate(() => {
      this.analyzeOwnTables()
        .then(() => {
          this.rowsAtAnalyze += this.changedSinceAnalyze;
          this.changedSinceAnalyze = 0;
        })
        // A closed engine has nothing to analyze; a failed ANALYZE is tried again after the next change.
        .catch(() => {})
        .finally(() => (this.analyzing = false));
    }).unref();
  }

  /**
   * ANALYZE of this schema's tables alone. The bare command analyzes every table of the database,
   * the system catalogs too: ~45 ms on PGlite for a schema whose own tables take ~2.5 ms each
   * (measured), and run after every 10 % of growth it cost a write-heavy service more than the writes.
   */
  private analyzeOwnTables(): Promise<void> {
    return this.exclusive(() => {
      const { rows } = this.statement<{ name: string }>(
        "SELECT format('%I.%I', schemaname, tablename) AS name FROM pg_tables WHERE schemaname = $1",
        [this.schema],
      );
      if (rows.length > 0) this.script(`ANALYZE ${rows.map((r) => r.name).join(", ")}`);
    });
  }

  private script(sql: string): void {
    measuredSync(sql, this.schema, () => this.session.script(sql));
  }

  transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return this.inTurn(async () => {
      let open = true;
      const usable = async () => {
        if (!open) throw new Error("the transaction has ended");
      };
      const tx: SqlExecutor = {
        query: <R>(sql: string, params?: unknown[]) => usable().then(() => this.statement<R>(sql, params)),
        exec: (sql: string) => usable().then(() => this.script(sql)),
      };
      this.statement("BEGIN", []);
      try {
        const value = await work(tx);
        open = false;
        // As on a server: COMMIT of a transaction that a failed statement aborted answers ROLLBACK.
        const commit = this.statement("COMMIT", []);
        if (commit.command === "ROLLBACK") throw new Error(TRANSACTION_ABORTED);
        return value;
      } catch (err) {
        if (open) {
          open = false;
          try {
            this.statement("ROLLBACK", []);
          } catch {
            // the engine is gone: nothing to roll back
          }
        }
        throw err;
      }
    });
  }

  async listen(channel: string, handler: (payload: string) => void): Promise<() => Promise<void>> {
    assertIdentifier(channel);
    const remove = this.session.addListener(channel, handler);
    try {
      await this.exec(`LISTEN ${channel}`);
    } catch (err) {
      remove();
      throw err;
    }
    return async () => {
      if (remove() && !this.db.closed) await this.exec(`UNLISTEN ${channel}`);
    };
  }

  /** Closes the engine once the work holding or awaiting the lock is done. */
  async close(): Promise<void> {
    this.unreport();
    await this.inTurn(async () => {
      if (!this.db.closed) await this.db.close();
    });
  }
}

/**
 * Opens the embedded engine: under `dataDir`, or in memory when it is undefined (tests). Its session
 * works in `schema` (search_path): a schema not made yet is simply skipped until its migrations make it.
 */
export async function openPgliteDatabase(dataDir: string | undefined, schema: string): Promise<SqlDatabase> {
  assertIdentifier(schema);
  // A new cluster is a copy of the shipped one rather than an initdb of its own (see pglite-cluster.ts).
  if (dataDir) {
    mkdirSync(dataDir, { recursive: true });
    seedDataDir(dataDir);
  }
  const cluster = dataDir ? undefined : initialisedCluster();
  // One options object: `new PGlite(undefined, options)` (in memory) silently drops the options.
  const lite = new PGlite({
    dataDir,
    ...(cluster ? { loadDataDir: cluster } : {}),
    startParams: [...PGlite.defaultStartParams, ...PGLITE_SETTINGS.flatMap((setting) => ["-c", setting])],
    parsers: { [pgliteTypes.INT8]: parseInt8 },
  });
  await lite.waitReady;
  const db = new PgliteDatabase(lite, schema);
  try {
    await db.exec(`SET search_path TO ${schema}`);
  } catch (err) {
    await db.close();
    throw err;
  }
  return db;
}
