// A PostgreSQL server through node-postgres (`pg`): a pool of connections working in the service's
// schema (search_path), bounded in time, and one more connection that carries every LISTEN. The
// server may restart or drop a connection at any moment: every connection held here has its `error`
// handled (pg emits it when the socket breaks, and an unheard `error` ends the process), a broken one
// is thrown away, and the LISTEN connection is made again and tells its listeners to read what they
// may have missed.
import pg from "pg";
import { remainingMs, type CallScope } from "../call-deadline.js";
import { DomainError } from "../domain-error.js";
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
import { isConnectionLoss, refusedBeforeRunning, translateDatabaseError, translating } from "./error-translation.js";
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
 * A statement the server refused before running it (no connection could be made: it is restarting,
 * down, or full) is tried once more after this long; a transaction's connection only when the call it
 * is for leaves the time (a single statement is not told its call: it never ran, and the server
 * answers the caller at its deadline whatever a second try does).
 */
const REFUSED_RETRY_MS = 250;
/** The LISTEN connection, once lost, is made again after this long, doubling up to the second figure. */
const LISTENER_RETRY_MS = 100;
const LISTENER_RETRY_MAX_MS = 2_000;

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

/** One LISTEN of a store: its NOTIFY payloads, and what it does after notifications may have been lost. */
interface Subscription {
  readonly onNotify: (payload: string) => void;
  readonly onResync: (() => void) | undefined;
}

class PostgresDatabase implements SqlDatabase {
  readonly engine = "postgres";
  // One connection carries every LISTEN of this process; it is made again if the server drops it.
  private listener: Promise<pg.Client> | undefined;
  private readonly subscriptions = new Map<string, Set<Subscription>>();
  private listenerRetryMs = LISTENER_RETRY_MS;
  /** The LISTEN connection was lost since it was last made: the next one tells every listener to read again. */
  private lostListener = false;
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
    this.listener ??= this.openListener().catch((err: unknown) => {
      this.listener = undefined;
      throw translateDatabaseError(err);
    });
    return this.listener;
  }

  private async openListener(): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: this.connectionString, keepAlive: true });
    let established = false;
    // A connection made again after one was lost: what arrives on it waits until every listener has
    // been told to read again (onResync), so that a listener's catch-up comes before what follows it.
    const resync = this.lostListener;
    let held: pg.Notification[] | undefined = resync ? [] : undefined;
    const deliver = (msg: pg.Notification) => {
      for (const subscription of this.subscriptions.get(msg.channel) ?? []) subscription.onNotify(msg.payload ?? "");
    };
    client.on("notification", (msg) => (held ? held.push(msg) : deliver(msg)));
    // Heard from the start: a server that goes away during the connect must not end the process.
    // Its "end" follows, which makes the connection again.
    client.on("error", () => void client.end().catch(() => {}));
    client.on("end", () => {
      if (established) this.listenerLost(client);
    });
    try {
      await client.connect();
      for (const channel of this.subscriptions.keys()) await client.query(`LISTEN ${channel}`);
    } catch (err) {
      void client.end().catch(() => {});
      throw err;
    }
    established = true;
    if (resync) {
      this.lostListener = false;
      // Whatever was notified while no connection listened is lost: each listener reads again.
      for (const set of this.subscriptions.values()) for (const s of set) s.onResync?.();
      const waiting = held ?? [];
      held = undefined;
      for (const msg of waiting) deliver(msg);
    }
    return client;
  }

  /** The LISTEN connection broke: make it again (with back-off) while anyone listens. */
  private listenerLost(client: pg.Client): void {
    this.lostListener = true;
    void this.listener?.then((current) => {
      if (current === client) this.listener = undefined;
    });
    this.scheduleListener();
  }

  private scheduleListener(): void {
    if (this.closing || this.subscriptions.size === 0) return;
    const delay = this.listenerRetryMs;
    this.listenerRetryMs = Math.min(LISTENER_RETRY_MAX_MS, delay * 2);
    setTimeout(() => {
      if (this.closing || this.subscriptions.size === 0) return;
      this.connectListener().then(
        () => (this.listenerRetryMs = LISTENER_RETRY_MS),
        () => this.scheduleListener(),
      );
    }, delay).unref();
  }

  async listen(
    channel: string,
    onNotify: (payload: string) => void,
    onResync?: () => void,
  ): Promise<() => Promise<void>> {
    assertIdentifier(channel);
    const fresh = !this.subscriptions.has(channel);
    const set = this.subscriptions.get(channel) ?? new Set();
    const subscription: Subscription = { onNotify, onResync };
    set.add(subscription);
    this.subscriptions.set(channel, set);
    const unsubscribe = () => {
      set.delete(subscription);
      if (set.size > 0) return false;
      if (this.subscriptions.get(channel) === set) this.subscriptions.delete(channel);
      return true;
    };
    try {
      const client = await this.connectListener();
      if (fresh) await translating(() => client.query(`LISTEN ${channel}`));
    } catch (err) {
      unsubscribe();
      throw err;
    }
    return async () => {
      if (!unsubscribe()) return;
      const client = await this.listener?.catch(() => undefined);
      await client?.query(`UNLISTEN ${channel}`).catch(() => {});
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
    return this.run<R>(this.pool, sql, params, false);
  }

  /**
   * One statement on the pool or a transaction's connection, timed, its failure translated. On the
   * pool, a statement the server refused before running it is tried once more (`again`: this is that
   * try). A plain promise chain, not async functions in async functions: every read of a service runs it.
   */
  private run<R>(
    on: pg.Pool | pg.PoolClient,
    sql: string,
    params: unknown[] | undefined,
    again: boolean,
  ): Promise<SqlResult<R>> {
    const measurement = beginStatement(sql, this.schema);
    return on.query(this.statement(sql, params)).then(
      (result) => {
        measurement.ok();
        return { rows: result.rows as R[], rowCount: result.rowCount ?? result.rows.length };
      },
      (err: unknown) => {
        const translated = translateDatabaseError(err);
        measurement.failed(translated);
        if (on === this.pool && !again && refusedBeforeRunning(err))
          return delay(REFUSED_RETRY_MS).then(() => this.run<R>(on, sql, params, true));
        throw translated;
      },
    );
  }

  async exec(sql: string): Promise<void> {
    await measured(sql, this.schema, () => translating(() => this.pool.query(sql)));
  }

  /** A connection of the pool for a transaction; a refusal before any connection was made is tried once more. */
  private async checkOut(call: CallScope | undefined): Promise<pg.PoolClient> {
    try {
      return await this.pool.connect();
    } catch (err) {
      if (!refusedBeforeRunning(err) || !timeLeftFor(REFUSED_RETRY_MS, call)) throw translateDatabaseError(err);
    }
    await delay(REFUSED_RETRY_MS);
    return translating(() => this.pool.connect());
  }

  async transaction<T>(work: (tx: SqlExecutor) => Promise<T>, call?: CallScope): Promise<T> {
    const remaining = remainingMs(call);
    if (remaining !== undefined && remaining <= 0)
      throw new DomainError("DEADLINE_EXCEEDED", "the call's deadline passed before its database work began");
    const client = await this.checkOut(call);
    // While it is checked out, the pool does not hear the connection's `error` (the server went
    // away): heard here, the connection is thrown away at release, never handed out again.
    let lost: unknown;
    const onError = (err: unknown) => (lost ??= err);
    client.on("error", onError);
    let committing = false;
    try {
      // Within a call, no statement or lock wait outlives the caller: work does not go on after its 504.
      const begin = remaining === undefined ? "BEGIN" : beginWithin(remaining);
      await measured("BEGIN", this.schema, () => translating(() => client.query(begin)));
      const value = await work({
        query: <R>(sql: string, params?: unknown[]) => this.run<R>(client, sql, params, true),
        exec: async (sql: string) => {
          await measured(sql, this.schema, () => translating(() => client.query(sql)));
        },
      });
      committing = true;
      // COMMIT of a transaction a failed statement aborted is answered ROLLBACK: nothing was stored.
      const commit = await measured("COMMIT", this.schema, () => client.query("COMMIT"));
      if (commit.command === "ROLLBACK") throw new Error(TRANSACTION_ABORTED);
      return value;
    } catch (err) {
      if (isConnectionLoss(err)) lost ??= err;
      // A connection lost before COMMIT stored nothing (the server rolls back what it cannot finish);
      // lost during COMMIT, the server may have committed before it went: nobody can say.
      const commitCut = committing && lost !== undefined;
      if (lost === undefined) await client.query("ROLLBACK").catch((e: unknown) => (lost ??= e));
      if (commitCut)
        throw new DomainError(
          "DEADLINE_EXCEEDED",
          "the database connection was lost during COMMIT: the outcome is unknown",
        );
      throw translateDatabaseError(err);
    } finally {
      client.removeListener("error", onError);
      client.release(lost === undefined ? undefined : lost instanceof Error ? lost : true);
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

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Whether the call this work is done for (if any) has time left to wait `ms` and try again. */
function timeLeftFor(ms: number, call: CallScope | undefined): boolean {
  const remaining = remainingMs(call);
  return remaining === undefined || remaining > ms * 2;
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
    // A server that vanished without closing its connections (a host gone) is found out, not waited on.
    keepAlive: true,
    max: options.forMigrationStep ? 1 : (options.maxConnections ?? DEFAULT_POOL_MAX),
    options: `-c search_path=${options.schema}`,
    ...(options.forMigrationStep ? {} : { statement_timeout: STATEMENT_TIMEOUT_MS }),
    lock_timeout: LOCK_TIMEOUT_MS,
    connectionTimeoutMillis: options.forMigrationStep ? 10_000 : CONNECTION_WAIT_MS,
    types: { getTypeParser },
  });
  // An idle connection that loses its server must not end the process: the pool drops it, and the
  // next statement connects anew.
  pool.on("error", () => {});
  return new PostgresDatabase(pool, options.schema, options.databaseUrl);
}
