// What a service's store sees of its database, whichever engine runs it (embedded PGlite, or a
// PostgreSQL server through `pg`): statements with `$n` parameters, scripts, transactions, LISTEN.
// Both adapters implement SqlDatabase; the few rules they share are here too.
import type { CallScope } from "../call-deadline.js";

export interface SqlResult<R> {
  rows: R[];
  rowCount: number;
}

export interface SqlExecutor {
  query<R = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<SqlResult<R>>;
  /** Runs a script of several statements without parameters (migrations). */
  exec(sql: string): Promise<void>;
}

export interface SqlDatabase extends SqlExecutor {
  readonly engine: "pglite" | "postgres";
  readonly schema: string;
  /**
   * Runs `work` in one transaction: committed when it resolves, rolled back when it throws. `call`:
   * the call it is done for, if any — on a server, none of its statements or lock waits outlives that
   * call's deadline (embedded PGlite runs one statement at a time and has no such bound).
   */
  transaction<T>(work: (tx: SqlExecutor) => Promise<T>, call?: CallScope): Promise<T>;
  /**
   * LISTEN on a channel: `handler` gets every NOTIFY payload (sent by any process on the same
   * database, after its transaction commits). Resolves to the function that stops listening.
   * `onResync` runs after the connection carrying the LISTEN broke and was made again: notifications
   * sent meanwhile are lost, so a listener reads what it follows again (embedded PGlite never loses one).
   */
  listen(channel: string, handler: (payload: string) => void, onResync?: () => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
  /**
   * Only for a migration that drops or renames a table or column (a contract step): why no release
   * that can still be running uses it — the release that stopped using it, shipped before this one.
   * test/migrations.test.ts refuses such a step without it, or while the code still names what it drops.
   */
  readonly contract?: string;
}

/**
 * What a process does with its schema at start: `apply` its migrations (the default: `npm start`, the
 * tests, a deployment without a migration step), or `verify` that they were applied (deploy/: a
 * migration step runs first) and refuse to start when one is missing.
 */
export type SchemaAtStart = "apply" | "verify";

/** What a COMMIT answered ROLLBACK means: a statement in the transaction failed, nothing was stored. */
export const TRANSACTION_ABORTED = "the transaction was rolled back: a statement in it failed";

/** int8 columns read as bigint by both engines. */
export const INT8_OID = 20;
export const parseInt8 = (value: string): bigint => BigInt(value);

/** bigint parameters travel as text: both drivers then agree on them. */
export function normalizeParams(params: unknown[] | undefined): unknown[] | undefined {
  return params?.map((p) => (typeof p === "bigint" ? p.toString() : p));
}

/** A schema or channel name spliced into SQL: a lower-case identifier, nothing else. */
export function assertIdentifier(name: string): void {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`invalid schema name "${name}"`);
}
