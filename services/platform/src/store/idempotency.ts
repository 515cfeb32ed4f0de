// Idempotency keys (after the IETF httpapi Idempotency-Key draft), kept in the service's own
// database: the key record and the business write commit in one transaction, so a retry either
// finds the finished result or nothing at all — never half of it.
import { DomainError } from "../domain-error.js";
import { assertIdempotencyKey } from "../idempotency-keys.js";
import { idempotentReplays } from "../metrics.js";
import type { SqlDatabase, SqlExecutor } from "./engine.js";
import type { CallScope } from "../call-deadline.js";
import type { Logger } from "../logger.js";
import { parse, setting } from "../config.js";

/** The setting of every service that keeps idempotency keys. */
export const idempotencyKeyTtlSetting = setting(
  "IDEMPOTENCY_KEY_TTL_HOURS",
  parse.int(24, 24 * 365),
  "how long Idempotency-Keys are remembered (at least 24)",
  48,
);

const PURGE_INTERVAL_MS = 60 * 60 * 1000;

/** Include in a service's migrations to use `runIdempotent`. */
export const IDEMPOTENCY_TABLE_SQL = `
CREATE TABLE idempotency_keys (
  tenant_id    text        NOT NULL,
  operation    text        NOT NULL,
  key          text        NOT NULL,
  request_hash text        NOT NULL,
  response     bytea,
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, operation, key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
`;

/**
 * Brings a table made by IDEMPOTENCY_TABLE_SQL to keys scoped by principal (include it in a service's
 * next migration). Keys stored before keep the principal '' and are honoured only where the service
 * says the stored result is the caller's (IdempotencyScope.ownsUnscoped); they age out with the TTL.
 * The default stays: pods of the release before, still running during a rolling update, insert
 * without a principal — their keys land as '' too, and are treated like the ones stored before.
 */
export const IDEMPOTENCY_PRINCIPAL_SQL = `
ALTER TABLE idempotency_keys ADD COLUMN principal text NOT NULL DEFAULT '';
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
ALTER TABLE idempotency_keys ADD PRIMARY KEY (tenant_id, principal, operation, key);
`;

/** The principal of keys stored before keys had principals. */
const UNSCOPED = "";

export interface IdempotencyScope<T = unknown> {
  tenantId: string;
  /**
   * Who sent the key (principalOf: a user, or a service acting with its own authority): keys of one
   * principal never meet another's — none can claim, replay, probe or block another's key.
   */
  principal: string;
  /** The operation the key belongs to, e.g. "payments.create": keys of different operations never meet. */
  operation: string;
  key: string;
  /** Fingerprint of the request (see requestFingerprint): same key with another request → 422. */
  requestHash: string;
  /**
   * For a key stored before keys had principals: whether its result (undefined: the key was voided)
   * is this principal's to replay. Absent: such keys are never this principal's.
   */
  ownsUnscoped?: (result: T | undefined) => boolean;
  /** The call the keyed work is done for, if any: its deadline bounds the transaction. */
  call?: CallScope | undefined;
}

/** What a request brings to a keyed store operation: the key, who sent it, the request's fingerprint, and its call. */
export type KeyedRequest<T = unknown> = Omit<IdempotencyScope<T>, "tenantId" | "operation">;

export interface ResultCodec<T> {
  encode(value: T): Uint8Array;
  decode(bytes: Uint8Array): T;
}

/**
 * Stores a result as JSON, keeping bigints and Dates exact (tagged), however deeply nested:
 * a replay decodes to the same value the first call returned.
 */
export function jsonResultCodec<T>(): ResultCodec<T> {
  return {
    encode: (value) =>
      new TextEncoder().encode(
        JSON.stringify(value, function (this: Record<string, unknown>, key: string, json: unknown) {
          const raw = this[key];
          if (typeof raw === "bigint") return { $bigint: raw.toString() };
          if (raw instanceof Date) return { $date: raw.toISOString() };
          return json;
        }),
      ),
    decode: (bytes) =>
      JSON.parse(new TextDecoder().decode(bytes), (_key, value: unknown) => {
        if (value && typeof value === "object") {
          if ("$bigint" in value) return BigInt((value as { $bigint: string }).$bigint);
          if ("$date" in value) return new Date((value as { $date: string }).$date);
        }
        return value;
      }) as T,
  };
}

export interface IdempotentOutcome<T> {
  result: T;
  replayed: boolean;
}

/** The request_hash of a key settled as never used: no real fingerprint (base64url) contains a '!'. */
const VOIDED = "!voided";

interface KeyRecord {
  request_hash: string;
  response: Uint8Array | null;
}

const KEY_COLUMNS =
  "request_hash, response FROM idempotency_keys WHERE tenant_id = $1 AND principal = $2 AND operation = $3 AND key = $4";

/** The row's identity: tenant, principal, operation and the key (keys compare case-insensitively). */
function keyParamsOf(
  scope: Pick<IdempotencyScope, "tenantId" | "principal" | "operation" | "key">,
): [string, string, string, string] {
  assertIdempotencyKey(scope.key);
  return [scope.tenantId, scope.principal, scope.operation, scope.key.toLowerCase()];
}

async function readKey(db: SqlExecutor, params: readonly string[]): Promise<KeyRecord | undefined> {
  return (await db.query<KeyRecord>(`SELECT ${KEY_COLUMNS}`, params as string[])).rows[0];
}

/**
 * A key of the same tenant, operation and value stored before keys had principals, when the scope
 * says its result is this principal's (it stands for the principal's own record); undefined otherwise.
 */
async function ownUnscopedKey<T>(
  db: SqlExecutor,
  scope: Omit<IdempotencyScope<T>, "requestHash">,
  params: readonly string[],
  codec: ResultCodec<T>,
): Promise<KeyRecord | undefined> {
  if (!scope.ownsUnscoped || scope.principal === UNSCOPED) return undefined;
  const record = await readKey(db, [params[0]!, UNSCOPED, params[2]!, params[3]!]);
  if (!record) return undefined;
  const result = record.request_hash === VOIDED || !record.response ? undefined : codec.decode(record.response);
  return scope.ownsUnscoped(result) ? record : undefined;
}

/**
 * Runs `work` at most once per scope. The first call stores its encoded result with the key in
 * the same transaction as the work; later calls with the same request get that result back
 * (replayed), and with another request an IDEMPOTENCY_KEY_REUSED error. Concurrent first calls
 * wait on the key's row: one does the work, the rest replay it.
 */
export async function runIdempotent<T>(
  db: SqlDatabase,
  scope: IdempotencyScope<T>,
  codec: ResultCodec<T>,
  work: (tx: SqlExecutor) => Promise<T>,
): Promise<IdempotentOutcome<T>> {
  const keyParams = keyParamsOf(scope);
  const outcome = await db.transaction(async (tx): Promise<IdempotentOutcome<T>> => {
    // A first call still in flight holds this key: the second is told so at once (409), instead of
    // waiting on the key's row for the first to finish. (Embedded storage runs transactions one at a
    // time: there the second simply finds the first done.)
    const { rows } = await tx.query<{ free: boolean }>(
      `SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS free`,
      [keyParams.join("/")],
    );
    if (!rows[0]?.free)
      throw new DomainError(
        "IDEMPOTENCY_KEY_IN_FLIGHT",
        "a request with this Idempotency-Key is still in progress; retry later",
      );
    const earlier = await ownUnscopedKey(tx, scope, keyParams, codec);
    if (earlier) return { result: codec.decode(storedResponse(earlier, scope.requestHash)!), replayed: true };
    const claimed = await tx.query(
      `INSERT INTO idempotency_keys (tenant_id, principal, operation, key, request_hash) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
      [...keyParams, scope.requestHash],
    );
    if (claimed.rowCount === 1) {
      const result = await work(tx);
      await tx.query(
        `UPDATE idempotency_keys SET response = $5 WHERE tenant_id = $1 AND principal = $2 AND operation = $3 AND key = $4`,
        [...keyParams, codec.encode(result)],
      );
      return { result, replayed: false };
    }
    const response = storedResponse(await readKey(tx, keyParams), scope.requestHash);
    if (!response)
      throw new DomainError(
        "IDEMPOTENCY_KEY_IN_FLIGHT",
        "a request with this Idempotency-Key is still in progress; retry later",
      );
    return { result: codec.decode(response), replayed: true };
  }, scope.call);
  if (outcome.replayed) idempotentReplays.labels({ operation: scope.operation }).inc();
  return outcome;
}

/** A key's stored response, refusing a void key and another request's; undefined while there is none. */
function storedResponse(record: KeyRecord | undefined, requestHash: string): Uint8Array | undefined {
  if (!record) return undefined;
  if (record.request_hash === VOIDED)
    throw new DomainError(
      "IDEMPOTENCY_KEY_VOIDED",
      "this Idempotency-Key was settled as never used: nothing will be made with it; use a new key",
    );
  if (record.request_hash !== requestHash)
    throw new DomainError(
      "IDEMPOTENCY_KEY_REUSED",
      "this Idempotency-Key was already used with a different request body",
    );
  return record.response ?? undefined;
}

/**
 * The result a finished first call stored with this key, read without claiming anything — for work
 * that must call another service before `runIdempotent` (a replay must not depend on that call).
 * Undefined when there is none yet; the same errors as `runIdempotent` for another request or a void key.
 */
export async function findIdempotentResult<T>(
  db: SqlExecutor,
  scope: IdempotencyScope<T>,
  codec: ResultCodec<T>,
): Promise<T | undefined> {
  const keyParams = keyParamsOf(scope);
  const record = (await ownUnscopedKey(db, scope, keyParams, codec)) ?? (await readKey(db, keyParams));
  const response = storedResponse(record, scope.requestHash);
  return response ? codec.decode(response) : undefined;
}

/**
 * What happened under one of a principal's keys: the result stored with it — or, when there is none,
 * the key is claimed as void in the same statement, so that `runIdempotent` refuses it from then on.
 * Either answer is final. A first call still in flight holds the key's row uncommitted; the claim
 * waits for it (PostgreSQL's unique-index check), so the answer is never "void" for work that then commits.
 */
export async function resolveIdempotencyKey<T>(
  db: SqlDatabase,
  scope: Omit<IdempotencyScope<T>, "requestHash">,
  codec: ResultCodec<T>,
): Promise<{ result: T } | { voided: true }> {
  const keyParams = keyParamsOf(scope);
  return db.transaction(async (tx) => {
    // Wait (within the call's time) for a first call still in flight under the key: its outcome decides.
    await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [keyParams.join("/")]);
    let record = await ownUnscopedKey(tx, scope, keyParams, codec);
    if (!record) {
      const claimed = await tx.query(
        `INSERT INTO idempotency_keys (tenant_id, principal, operation, key, request_hash) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
        [...keyParams, VOIDED],
      );
      if (claimed.rowCount === 1) return { voided: true as const };
      record = await readKey(tx, keyParams);
    }
    if (!record || record.request_hash === VOIDED) return { voided: true as const };
    // A committed key row always holds its response (written in the transaction that claimed it).
    if (!record.response)
      throw new DomainError("IDEMPOTENCY_KEY_IN_FLIGHT", "the work under this key is still in progress; retry later");
    return { result: codec.decode(record.response) };
  }, scope.call);
}

/**
 * Forgets keys older than the limit; returns how many, or undefined when another replica is purging
 * right now (one at a time: a transaction-scoped advisory lock, skipped rather than waited for).
 */
export async function purgeIdempotencyKeys(db: SqlDatabase, olderThanMs: number): Promise<number | undefined> {
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<{ free: boolean }>(
      `SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS free`,
      [`switchyard.purge-idempotency-keys.${db.schema}`],
    );
    if (!rows[0]?.free) return undefined;
    const result = await tx.query(
      `DELETE FROM idempotency_keys WHERE created_at < now() - ($1::bigint * interval '1 millisecond')`,
      [olderThanMs],
    );
    return result.rowCount;
  });
}

/** Purges expired keys now and then hourly; returns the stop function. A failed purge is retried next hour. */
export function schedulePurgeOfIdempotencyKeys(db: SqlDatabase, ttlHours: number, logger: Logger): () => void {
  const purge = () =>
    purgeIdempotencyKeys(db, ttlHours * 3_600_000).then(
      (n) => n !== undefined && n > 0 && logger.info({ purged: n }, "forgot expired idempotency keys"),
      (err: unknown) => logger.warn({ message: String(err) }, "idempotency key purge failed"),
    );
  const timer = setInterval(() => void purge(), PURGE_INTERVAL_MS).unref();
  void purge();
  return () => clearInterval(timer);
}
