// A PostgreSQL server through node-postgres (`pg`): a pool of connections working in the service's
// schema (search_path), bounded in time, and one more connection that carries every LISTEN.
import pg from "pg";
import { remainingCallMs } from "../call-deadline.js";
import { fail } from "../errors.js";
import { reportPool } from "../metrics.js";
import {
  assertIdentifier,
  INT8_OID,
  normalizeParams,
  parseInt8,
  TRANSACTION_ABORTED,
  type SqlDatabase,
  type SqlExecutor,
  type SqlResult,
} from "./engine.js";
import { translateDatabaseError, translating } from "./error-translation.js";
import { beginStatement, measured } from "./statement-telemetry.js";

// Time bounds on a server. Work outside any call (migrations, the reconciler, purges) gets these;
// work of a call gets what is left of the call's deadline instead (see PostgresDatabase.transaction).
const STATEMENT_TIMEOUT_MS = 30_000;
const LOCK_TIMEOUT_MS = 10_000;
/** How long a call waits for a free connection before it is answered 503 (the pool is exhausted). */
const CONNECTION_WAIT_MS = 2_000;
/** A pool's size when none is given (DATABASE_POOL_MAX's default). */
export const DEFAULT_POOL_MAX = 10;

/**
 * Statements with parameters — the ones a store's code holds and runs again and again — are named
 * prepared statements: each connection parses and plans one once (pg remembers which it prepared),
 * and every later run is bind and execute. The names are this database's own (text → name), so
 * bounded: SQL built at run time past this many distinct texts runs unnamed, parsed each time.
 * The stores name every column they read (no `*`): a newer release's migration that adds a column
 * then leaves a prepared statement's result as it was, where PostgreSQL would refuse to run it
 * ("cached plan must not change result type") — services/platform/test/postgres-statements.test.ts holds them to it.
 */
export const MAX_NAMED_STATEMENTS = 256;

const getTypeParser = ((oid: number, format?: "text" | "binary") =>
  oid === INT8_OID ? parseInt8 : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser;

class PostgresDatabase implements SqlDatabase {
  readonly engine = "postgres";
  // One connection carries every LISTEN of this process; it is re-made if the server drops it.
  private listener: Promise<pg.Client> | undefined;
  private readonly handlers = new Map<string, Set<(payload: string) => void>>();
  private closing = false;
  private ending: Promise<void> | undefined;
  /** The name of each statement text prepared by name (see MAX_NAMED_STATEMENTS). */
  private readonly statementNames = new Map<string, string>();
  /** Its connections in use and callers waiting, in the pool metrics until closed. */
  private readonly unreport = reportPool({ inUse: () => this.inUse, waiting: () => this.waiting });

  constructor(
    private readonly pool: pg.Pool,
    readonly schema: string,
    private readonly connectionString: string,
  ) {}

  private connectListener(): Promise<pg.Client> {
    this.listener ??= (async () => {
      const client = new pg.Client({ connectionString: this.connectionString });
      client.on("notification", (msg) => {
        for (const handler of this.handlers.get(msg.channel) ?? []) handler(msg.payload ?? "");
      });
      const reconnect = () => {
        this.listener = undefined;
        if (this.closing || this.handlers.size === 0) return;
        setTimeout(() => {
          this.connectListener().catch(() => reconnect());
        }, 1_000).unref();
      };
      client.on("error", () => {
        // Its "end" reconnects; a failure to end an already broken connection says nothing more.
        client.end().catch(() => {});
      });
      client.on("end", reconnect);
      await client.connect();
      for (const channel of this.handlers.keys()) await client.query(`LISTEN ${channel}`);
      return client;
    })();
    return this.listener;
  }

  async listen(channel: string, handler: (payload: string) => void): Promise<() => Promise<void>> {
    assertIdentifier(channel);
    const fresh = !this.handlers.has(channel);
    const set = this.handlers.get(channel) ?? new Set();
    set.add(handler);
    this.handlers.set(channel, set);
    const client = await this.connectListener();
    if (fresh) await client.query(`LISTEN ${channel}`);
    return async () => {
      set.delete(handler);
      if (set.size === 0) {
        this.handlers.delete(channel);
        await client.query(`UNLISTEN ${channel}`).catch(() => {});
      }
    };
  }

  /** Connections running work, and callers waiting for one (the pool metrics read them). */
  get inUse(): number {
    return this.pool.totalCount - this.pool.idleCount;
  }

  get waiting(): number {
    return this.pool.waitingCount;
  }

  /** What pg is given to run `sql`: by name when it has parameters and a name (see MAX_NAMED_STATEMENTS). */
  private statement(sql: string, params: unknown[] | undefined): pg.QueryConfig {
    const values = normalizeParams(params);
    if (values === undefined || values.length === 0) return { text: sql, values };
    let name = this.statementNames.get(sql);
    if (name === undefined) {
      if (this.statementNames.size >= MAX_NAMED_STATEMENTS) return { text: sql, values };
      name = `s${this.statementNames.size + 1}`;
      this.statementNames.set(sql, name);
    }
    return { name, text: sql, values };
  }

  query<R>(sql: string, params?: unknown[]): Promise<SqlResult<R>> {
    return this.run<R>(this.pool, sql, params);
  }

  /**
   * One statement on the pool or a transaction's connection, timed, its failure translated. A plain
   * promise chain, not async functions in async functions: every read of a service runs it.
   */
  private run<R>(on: pg.Pool | pg.PoolClient, sql: string, params: unknown[] | undefined): Promise<SqlResult<R>> {
    const measurement = beginStatement(sql, this.schema);
    return on.query(this.statement(sql, params)).then(
      (result) => {
        measurement.ok();
        return { rows: result.rows as R[], rowCount: result.rowCount ?? result.rows.length };
      },
      (err: unknown) => {
        const translated = translateDatabaseError(err);
        measurement.failed(translated);
        throw translated;
      },
    );
  }

  async exec(sql: string): Promise<void> {
    await measured(sql, this.schema, () => translating(() => this.pool.query(sql)));
  }

  async transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    const remaining = remainingCallMs();
    if (remaining !== undefined && remaining <= 0)
      throw fail("DEADLINE_EXCEEDED", "the call's deadline passed before its database work began");
    const client = await translating(() => this.pool.connect());
    try {
      // Within a call, no statement or lock wait outlives the caller: work does not go on after its 504.
      const begin = remaining === undefined ? "BEGIN" : beginWithin(remaining);
      await measured("BEGIN", this.schema, () => translating(() => client.query(begin)));
      const value = await work({
        query: <R>(sql: string, params?: unknown[]) => this.run<R>(client, sql, params),
        exec: async (sql: string) => {
          await measured(sql, this.schema, () => client.query(sql));
        },
      });
      // COMMIT of a transaction a failed statement aborted is answered ROLLBACK: nothing was stored.
      const commit = await measured("COMMIT", this.schema, () => client.query("COMMIT"));
      if (commit.command === "ROLLBACK") throw new Error(TRANSACTION_ABORTED);
      return value;
    } catch (err) {
      await client.query("ROLLBACK").catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }

  /** Like PGlite's, safe to call again (pg's Pool.end() rejects a second call). */
  close(): Promise<void> {
    this.closing = true;
    this.ending ??= (async () => {
      this.unreport();
      const listener = this.listener;
      this.listener = undefined;
      if (listener) await (await listener.catch(() => undefined))?.end().catch(() => {});
      await this.pool.end();
    })();
    return this.ending;
  }
}

/** BEGIN, with no statement or lock wait in the transaction allowed past `remainingMs`. */
function beginWithin(remainingMs: number): string {
  const ms = Math.max(1, Math.floor(remainingMs));
  return `BEGIN; SET LOCAL statement_timeout = ${ms}; SET LOCAL lock_timeout = ${ms}`;
}

export interface PostgresOptions {
  databaseUrl: string;
  /** Schema owned by the service (a lower-case identifier): every connection's search_path. */
  schema: string;
  /** Connections of the pool (DATABASE_POOL_MAX); the LISTEN connection is one more. */
  maxConnections?: number | undefined;
  /**
   * The migration step's connection (node dist/migrate.js): one, with no statement timeout (a
   * migration may rewrite a large table; a lock it waits for still times out) and a longer wait to connect.
   */
  forMigrationStep?: boolean | undefined;
}

/** A database on a PostgreSQL server; its pool connects on first use. */
export function openPostgresDatabase(options: PostgresOptions): SqlDatabase {
  assertIdentifier(options.schema);
  const pool = new pg.Pool({
    connectionString: options.databaseUrl,
    max: options.forMigrationStep ? 1 : (options.maxConnections ?? DEFAULT_POOL_MAX),
    options: `-c search_path=${options.schema}`,
    ...(options.forMigrationStep ? {} : { statement_timeout: STATEMENT_TIMEOUT_MS }),
    lock_timeout: LOCK_TIMEOUT_MS,
    connectionTimeoutMillis: options.forMigrationStep ? 10_000 : CONNECTION_WAIT_MS,
    types: { getTypeParser },
  });
  // An idle client that loses its server must not crash the process; the next query reconnects.
  pool.on("error", () => {});
  return new PostgresDatabase(pool, options.schema, options.databaseUrl);
}
