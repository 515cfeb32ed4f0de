// The PostgreSQL-family store adapter: embedded PGlite (a real PostgreSQL engine, persisted under
// ./data/<service>) when no DATABASE_URL is given, a PostgreSQL server through `pg` when it is.
// Each service owns one schema; versioned migrations are applied at start under an advisory lock
// so that replicas starting together do not race — or, where a deployment runs them as a step of their
// own before its rollout (`node dist/migrate.js`), only checked at start: a process refuses a schema
// older than its migrations and serves on a newer one (migrations are additive: expand, then contract
// a release later), so the previous release keeps working while the next one rolls out.
import { mkdirSync } from "node:fs";
import pg from "pg";
import { PGlite, types as pgliteTypes } from "@electric-sql/pglite";
import { remainingCallMs } from "../call-deadline.js";
import { fail } from "../errors.js";
import { dbStatementDuration, reportPool } from "../metrics.js";
import { SpanKind, SpanStatusCode, tracer, tracingEnabled } from "../tracing.js";
import { initialisedCluster, seedDataDir } from "./pglite-cluster.js";
import { PgliteSession, type StatementResult } from "./pglite-session.js";

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
  /** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T>;
  /**
   * LISTEN on a channel: `handler` gets every NOTIFY payload (sent by any process on the same
   * database, after its transaction commits). Resolves to the function that stops listening.
   */
  listen(channel: string, handler: (payload: string) => void): Promise<() => Promise<void>>;
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

/** The schema lacks migrations this code needs: run them first (`node dist/migrate.js <service>`). */
export class SchemaBehindError extends Error {
  constructor(readonly schema: string, readonly missing: readonly Migration[], readonly appliedVersion: number) {
    super(
      `schema "${schema}" is at version ${appliedVersion} and lacks ${missing.map((m) => `${m.version} (${m.name})`).join(", ")}: ` +
        `this release needs version ${Math.max(...missing.map((m) => m.version))}. Run the migrations first (node dist/migrate.js), or start with DATABASE_MIGRATIONS=apply`,
    );
  }
}

export interface OpenSqlOptions {
  /** postgres://… to use a server; undefined for embedded PGlite. */
  databaseUrl?: string | undefined;
  /** PGlite data directory; undefined keeps the embedded database in memory (tests). */
  dataDir?: string | undefined;
  /** Schema owned by the service (a lower-case identifier). */
  schema: string;
  migrations: readonly Migration[];
  /** Apply the migrations (default), or only verify they were applied (see SchemaAtStart). */
  schemaAtStart?: SchemaAtStart | undefined;
  /** Pool size for a PostgreSQL server (DATABASE_POOL_MAX); the LISTEN connection is one more. */
  maxConnections?: number | undefined;
}

const INT8_OID = 20;
const TRANSACTION_ABORTED = "the transaction was rolled back: a statement in it failed";
const parseInt8 = (value: string) => BigInt(value);

// Time bounds on a server. Work outside any call (migrations, the reconciler, purges) gets these;
// work of a call gets what is left of the call's deadline instead (see PostgresDatabase.transaction).
const STATEMENT_TIMEOUT_MS = 30_000;
const LOCK_TIMEOUT_MS = 10_000;
/** How long a call waits for a free connection before it is answered 503 (the pool is exhausted). */
const CONNECTION_WAIT_MS = 2_000;
/** A pool's size when none is given (DATABASE_POOL_MAX's default). */
export const DEFAULT_POOL_MAX = 10;

// Node's and pg's ways of saying the server cannot be reached or went away mid-query.
const CONNECTION_LOST = /ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|server closed the connection/i;

/**
 * What a database failure means for the caller. PostgreSQL's "data exception" class (22xxx: a NUL
 * character, a number or date out of range, text that is no integer): a value from the request
 * cannot be stored, 400. A statement or lock timeout (57014, 55P03): the call's time ran out, 504. The
 * server unreachable, gone, restarting (08xxx, 57P01–57P03), or no connection free in time: 503.
 */
function translated(err: unknown): unknown {
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string") {
    if (code.startsWith("22")) return fail("INVALID_REQUEST", "a value in the request cannot be stored (e.g. a NUL character, or a number or date out of range)");
    if (code === "57014" || code === "55P03") return fail("DEADLINE_EXCEEDED", "the database work did not finish within the call's deadline");
    if (code.startsWith("08") || code === "57P01" || code === "57P02" || code === "57P03") return fail("STORE_UNAVAILABLE", "the database is unavailable; retry after the Retry-After delay");
  }
  if (err instanceof Error && !(code && typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) && CONNECTION_LOST.test(err.message)) {
    return fail("STORE_UNAVAILABLE", "the database is unavailable; retry after the Retry-After delay");
  }
  return err;
}

async function translating<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    throw translated(err);
  }
}

// ---- metrics and spans of every statement (never its parameter values) ----------------------------------

const VERBS = new Set(["SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "BEGIN", "COMMIT", "ROLLBACK", "SET", "LISTEN", "UNLISTEN", "NOTIFY", "CREATE", "ALTER", "DROP", "LOCK"]);
const verbCache = new Map<string, string>();
/** The statement's SQL verb (bounded: a known one, else OTHER), as a metric label and span name. */
function verbOf(sql: string): string {
  let verb = verbCache.get(sql);
  if (verb === undefined) {
    const word = /^\s*([A-Za-z]+)/.exec(sql)?.[1]?.toUpperCase() ?? "OTHER";
    verb = VERBS.has(word) ? word : "OTHER";
    if (verbCache.size < 2_000) verbCache.set(sql, verb);
  }
  return verb;
}
const statementChildren = new Map<string, { observe(v: number): void }>();
function observeStatement(verb: string, outcome: "ok" | "error", seconds: number): void {
  const key = `${verb} ${outcome}`;
  let child = statementChildren.get(key);
  if (!child) statementChildren.set(key, (child = dbStatementDuration.labels({ operation: verb, outcome })));
  child.observe(seconds);
}

/** Runs one statement, timed, and (when tracing) in a span with its text — placeholders, no values. */
async function measured<T>(sql: string, schema: string, run: () => Promise<T>): Promise<T> {
  const verb = verbOf(sql);
  const span = tracingEnabled()
    ? tracer().startSpan(`${verb} ${schema}`, { kind: SpanKind.CLIENT, attributes: { "db.system.name": "postgresql", "db.namespace": schema, "db.operation.name": verb, "db.query.text": sql.length > 2_000 ? `${sql.slice(0, 2_000)}…` : sql } })
    : undefined;
  const started = performance.now();
  try {
    const value = await run();
    observeStatement(verb, "ok", (performance.now() - started) / 1000);
    span?.end();
    return value;
  } catch (err) {
    observeStatement(verb, "error", (performance.now() - started) / 1000);
    if (span) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: typeof (err as { code?: unknown }).code === "string" ? String((err as { code: string }).code) : "error" });
      span.end();
    }
    throw err;
  }
}

/** bigint parameters travel as text: both drivers then agree on them. */
function normalizeParams(params: unknown[] | undefined): unknown[] | undefined {
  return params?.map((p) => (typeof p === "bigint" ? p.toString() : p));
}

function assertIdentifier(schema: string): void {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) throw new Error(`invalid schema name "${schema}"`);
}

class PgliteDatabase implements SqlDatabase {
  readonly engine = "pglite";
  private readonly session: PgliteSession;
  /** Work holding the engine (0 or 1: it runs one thing at a time), and work waiting for it. */
  inUse = 0;
  waiting = 0;

  constructor(private readonly db: PGlite, readonly schema: string) {
    this.session = new PgliteSession(db);
  }

  // PGlite serialises work with two locks: the transaction lock (a whole BEGIN … COMMIT, or one
  // statement outside a transaction) and the query lock (one statement). Holding them as PGlite's
  // own query() and transaction() do keeps a statement from landing inside another caller's transaction.
  query<R>(sql: string, params?: unknown[]): Promise<SqlResult<R>> {
    return this.exclusive(() => this.statement<R>(sql, params, false));
  }

  exec(sql: string): Promise<void> {
    return this.exclusive(() => this.script(sql, false));
  }

  /** Under the transaction lock, counted as in use (and as waiting until it has it). */
  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    this.waiting++;
    return this.db._runExclusiveTransaction(async () => {
      this.waiting--;
      this.inUse++;
      try {
        return await work();
      } finally {
        this.inUse--;
      }
    });
  }

  /** One statement under the query lock (the caller holds the transaction lock). */
  private statement<R>(sql: string, params: unknown[] | undefined, inTransaction: boolean): Promise<StatementResult<R>> {
    return this.db._runExclusiveQuery(() => measured(sql, this.schema, () => translating(() => this.session.run<R>(sql, normalizeParams(params) ?? [], inTransaction))));
  }

  private script(sql: string, inTransaction: boolean): Promise<void> {
    return this.db._runExclusiveQuery(() => measured(sql, this.schema, () => this.session.script(sql, inTransaction)));
  }

  transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return this.exclusive(async () => {
      let open = true;
      const usable = async () => {
        if (!open) throw new Error("the transaction has ended");
      };
      const tx: SqlExecutor = {
        query: <R>(sql: string, params?: unknown[]) => usable().then(() => this.statement<R>(sql, params, true)),
        exec: (sql: string) => usable().then(() => this.script(sql, true)),
      };
      await this.statement("BEGIN", [], true);
      try {
        const value = await work(tx);
        open = false;
        // As on a server: COMMIT of a transaction that a failed statement aborted answers ROLLBACK.
        const commit = await this.statement("COMMIT", [], false);
        if (commit.command === "ROLLBACK") throw new Error(TRANSACTION_ABORTED);
        return value;
      } catch (err) {
        if (open) {
          open = false;
          await this.statement("ROLLBACK", [], false).catch(() => {});
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

  async close(): Promise<void> {
    if (!this.db.closed) await this.db.close();
  }
}

class PostgresDatabase implements SqlDatabase {
  readonly engine = "postgres";
  // One connection carries every LISTEN of this process; it is re-made if the server drops it.
  private listener: Promise<pg.Client> | undefined;
  private readonly handlers = new Map<string, Set<(payload: string) => void>>();
  private closing = false;

  constructor(private readonly pool: pg.Pool, readonly schema: string, private readonly connectionString: string) {}

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
      client.on("error", () => client.end().catch(() => {}));
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

  get inUse(): number {
    return this.pool.totalCount - this.pool.idleCount;
  }

  get waiting(): number {
    return this.pool.waitingCount;
  }

  async query<R>(sql: string, params?: unknown[]): Promise<SqlResult<R>> {
    const result = await measured(sql, this.schema, () => translating(() => this.pool.query(sql, normalizeParams(params))));
    return { rows: result.rows as R[], rowCount: result.rowCount ?? result.rows.length };
  }

  async exec(sql: string): Promise<void> {
    await measured(sql, this.schema, () => translating(() => this.pool.query(sql)));
  }

  async transaction<T>(work: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    const remaining = remainingCallMs();
    if (remaining !== undefined && remaining <= 0) throw fail("DEADLINE_EXCEEDED", "the call's deadline passed before its database work began");
    const client = await translating(() => this.pool.connect());
    try {
      // Within a call, no statement or lock wait outlives the caller: work does not go on after its 504.
      if (remaining === undefined) await measured("BEGIN", this.schema, () => translating(() => client.query("BEGIN")));
      else await measured("BEGIN", this.schema, () => translating(() => client.query(`BEGIN; SET LOCAL statement_timeout = ${Math.max(1, Math.floor(remaining))}; SET LOCAL lock_timeout = ${Math.max(1, Math.floor(remaining))}`)));
      const value = await work({
        query: async <R>(sql: string, params?: unknown[]) => {
          const result = await measured(sql, this.schema, () => translating(() => client.query(sql, normalizeParams(params))));
          return { rows: result.rows as R[], rowCount: result.rowCount ?? result.rows.length };
        },
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

  private ending: Promise<void> | undefined;

  /** Like PGlite's, safe to call again (pg's Pool.end() rejects a second call). */
  close(): Promise<void> {
    this.closing = true;
    this.ending ??= (async () => {
      const listener = this.listener;
      this.listener = undefined;
      if (listener) await (await listener.catch(() => undefined))?.end().catch(() => {});
      await this.pool.end();
    })();
    return this.ending;
  }
}

function checkVersions(migrations: readonly Migration[]): void {
  const versions = migrations.map((m) => m.version);
  if (new Set(versions).size !== versions.length) throw new Error("duplicate migration version");
}

/** Applies the migrations not applied yet, in order, in one transaction; resolves to those it applied. */
async function migrate(db: SqlDatabase, migrations: readonly Migration[]): Promise<Migration[]> {
  checkVersions(migrations);
  return db.transaction(async (tx) => {
    // Replicas of one service starting together apply each migration once.
    await tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`switchyard.migrations.${db.schema}`]);
    // Created only when missing: a service's own role may own its schema without the right to create schemas.
    const exists = await tx.query(`SELECT 1 FROM pg_namespace WHERE nspname = $1`, [db.schema]);
    if (exists.rowCount === 0) await tx.query(`CREATE SCHEMA ${db.schema}`);
    await tx.query(`CREATE TABLE IF NOT EXISTS ${db.schema}.schema_migrations (
      version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const applied = await tx.query<{ version: number }>(`SELECT version FROM ${db.schema}.schema_migrations`);
    const done = new Set(applied.rows.map((r) => Number(r.version)));
    const applying: Migration[] = [];
    for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
      if (done.has(m.version)) continue;
      await tx.query(`SET LOCAL search_path TO ${db.schema}`);
      await tx.exec(m.sql);
      await tx.query(`INSERT INTO ${db.schema}.schema_migrations (version, name) VALUES ($1, $2)`, [m.version, m.name]);
      applying.push(m);
    }
    return applying;
  });
}

/** Applies the migrations an open database lacks (as a start in `apply` mode does); resolves to those applied. */
export function applyMigrations(db: SqlDatabase, migrations: readonly Migration[]): Promise<Migration[]> {
  return migrate(db, migrations);
}

/** The versions applied to the schema (none when it was never migrated). */
export async function appliedVersions(db: SqlExecutor, schema: string): Promise<number[]> {
  const table = await db.query<{ present: boolean }>(`SELECT to_regclass($1) IS NOT NULL AS present`, [`${schema}.schema_migrations`]);
  if (!table.rows[0]?.present) return [];
  const rows = await db.query<{ version: number }>(`SELECT version FROM ${schema}.schema_migrations ORDER BY version`);
  return rows.rows.map((r) => Number(r.version));
}

/**
 * Refuses a schema that lacks any of the migrations (SchemaBehindError). One with migrations beyond
 * them is a newer release's, made additive: this release serves on it.
 */
async function verify(db: SqlDatabase, migrations: readonly Migration[]): Promise<void> {
  checkVersions(migrations);
  const applied = await appliedVersions(db, db.schema);
  const done = new Set(applied);
  const missing = migrations.filter((m) => !done.has(m.version)).sort((a, b) => a.version - b.version);
  if (missing.length > 0) throw new SchemaBehindError(db.schema, missing, applied.length > 0 ? Math.max(...applied) : 0);
}

/**
 * The embedded engine's memory. PGlite keeps PostgreSQL's defaults for a server of its own: 128 MB
 * of shared buffers, zeroed at start and so resident in every process. One service's data is small
 * and the OS caches its files, so 16 MB do; WASM memory never shrinks, so index builds are bounded too.
 */
export const PGLITE_SETTINGS = ["shared_buffers=16MB", "maintenance_work_mem=16MB"] as const;
// (Its WebAssembly runs on V8's baseline compiler in the mesh's processes: see scripts/mesh.ts.)

async function openPglite(dataDir: string | undefined): Promise<PGlite> {
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
  return lite;
}

export async function openSqlDatabase(options: OpenSqlOptions): Promise<SqlDatabase> {
  assertIdentifier(options.schema);
  let db: SqlDatabase;
  if (options.databaseUrl) {
    const pool = new pg.Pool({
      connectionString: options.databaseUrl,
      max: options.maxConnections ?? DEFAULT_POOL_MAX,
      options: `-c search_path=${options.schema}`,
      statement_timeout: STATEMENT_TIMEOUT_MS,
      lock_timeout: LOCK_TIMEOUT_MS,
      connectionTimeoutMillis: CONNECTION_WAIT_MS,
      types: { getTypeParser: ((oid: number, format?: "text" | "binary") => (oid === INT8_OID ? parseInt8 : pg.types.getTypeParser(oid, format as "text"))) as typeof pg.types.getTypeParser },
    });
    // An idle client that loses its server must not crash the process; the next query reconnects.
    pool.on("error", () => {});
    db = new PostgresDatabase(pool, options.schema, options.databaseUrl);
  } else {
    db = new PgliteDatabase(await openPglite(options.dataDir), options.schema);
  }
  try {
    if (options.schemaAtStart === "verify") await verify(db, options.migrations);
    else await migrate(db, options.migrations);
    if (db.engine === "pglite") await db.query(`SET search_path TO ${options.schema}`);
  } catch (err) {
    await db.close();
    throw err;
  }
  // Its connections in use and callers waiting, in the metrics until it is closed.
  const pooled = db as SqlDatabase & { inUse: number; waiting: number };
  const unreport = reportPool({ inUse: () => pooled.inUse, waiting: () => pooled.waiting });
  const close = db.close.bind(db);
  db.close = () => {
    unreport();
    return close();
  };
  return db;
}

/**
 * Migrates a schema and closes the connection: the migration step of a deployment (node dist/migrate.js),
 * run before a rollout with no probe's clock on it. Resolves to the migrations it applied and the
 * versions the schema then has.
 */
export async function migrateSchema(options: { databaseUrl: string; schema: string; migrations: readonly Migration[] }): Promise<{ applied: Migration[]; versions: number[] }> {
  assertIdentifier(options.schema);
  const pool = new pg.Pool({
    connectionString: options.databaseUrl,
    max: 1,
    options: `-c search_path=${options.schema}`,
    // A migration may rewrite a large table: no statement timeout; a lock it waits for still times out.
    lock_timeout: LOCK_TIMEOUT_MS,
    connectionTimeoutMillis: 10_000,
    types: { getTypeParser: ((oid: number, format?: "text" | "binary") => (oid === INT8_OID ? parseInt8 : pg.types.getTypeParser(oid, format as "text"))) as typeof pg.types.getTypeParser },
  });
  pool.on("error", () => {});
  const db = new PostgresDatabase(pool, options.schema, options.databaseUrl);
  try {
    const applied = await migrate(db, options.migrations);
    return { applied, versions: await appliedVersions(db, options.schema) };
  } finally {
    await db.close();
  }
}
