// CacheLogStore on the PostgreSQL-family adapter. Every change of cached data is recorded by its
// writer (the documents', the catalog's, an import job's store), in the writer's own transaction,
// through `record`; leases are renewed under the same lock, which orders the two.
import type { SqlDatabase, SqlExecutor } from "@switchyard/platform/store";
import type { CacheChangeKind, CacheChangeRecord, CacheLogStore } from "./port.js";
import type { CallScope } from "@switchyard/platform/call-deadline.js";

/** A change of cached data as its writer records it (its position is the log's to give). */
export type CacheChange = Omit<CacheChangeRecord, "position">;

/** A change to the catalog: every catalog page. */
export const CATALOG_CHANGE: CacheChange = Object.freeze({ kind: "catalog", tenantId: "", id: "" });

/** Where a writer of cached data records its change, in its own transaction. */
export interface CacheChangeRecorder {
  record(tx: SqlExecutor, change: CacheChange): Promise<void>;
}

export class SqlCacheLogStore implements CacheLogStore, CacheChangeRecorder {
  private readonly cacheChangesChannel: string;
  private readonly cacheAcksChannel: string;
  /** The advisory lock every cache change and every lease renewal is taken under (see record). */
  private readonly cacheLogLock: string;

  constructor(private readonly db: SqlDatabase) {
    this.cacheChangesChannel = `${db.schema}_cache_changes`;
    this.cacheAcksChannel = `${db.schema}_cache_acks`;
    this.cacheLogLock = `${db.schema}.cache_changes`;
  }

  /**
   * Records a change of cached data in the writer's transaction, as its last statements. The lock,
   * held until commit, serialises changes (positions then increase in commit order, so a reader
   * following "after position p" never passes one that commits late) and orders them against lease
   * renewals (renewCacheLease).
   */
  async record(tx: SqlExecutor, change: CacheChange): Promise<void> {
    await tx.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [this.cacheLogLock]);
    // Delivered to every replica's listener when the transaction commits: a wake-up to read the log.
    await tx.query(
      `WITH c AS (INSERT INTO cache_changes (kind, tenant_id, id) VALUES ($1, $2, $3) RETURNING position) SELECT pg_notify($4, position::text) FROM c`,
      [change.kind, change.tenantId, change.id, this.cacheChangesChannel],
    );
  }

  async latestCacheChange(): Promise<bigint> {
    const { rows } = await this.db.query<{ position: bigint | null }>(
      `SELECT max(position) AS position FROM cache_changes`,
    );
    return BigInt(rows[0]?.position ?? 0n);
  }

  async cacheChangesAfter(position: bigint, limit: number): Promise<CacheChangeRecord[]> {
    const { rows } = await this.db.query<{ position: bigint; kind: CacheChangeKind; tenant_id: string; id: string }>(
      `SELECT position, kind, tenant_id, id FROM cache_changes WHERE position > $1 ORDER BY position LIMIT $2`,
      [position, limit],
    );
    return rows.map((r) => ({ position: BigInt(r.position), kind: r.kind, tenantId: r.tenant_id, id: r.id }));
  }

  watchCacheChanges(onChange: () => void): Promise<() => Promise<void>> {
    return this.db.listen(
      this.cacheChangesChannel,
      () => onChange(),
      () => onChange(),
    );
  }

  async pruneCacheLog(olderThanMs: number): Promise<void> {
    await this.db.query(
      `DELETE FROM cache_changes WHERE created_at < clock_timestamp() - $1::integer * interval '1 millisecond' AND position < (SELECT max(position) FROM cache_changes)`,
      [olderThanMs],
    );
    await this.db.query(
      `DELETE FROM cache_subscribers WHERE lease_until < clock_timestamp() - $1::integer * interval '1 millisecond'`,
      [olderThanMs],
    );
  }

  renewCacheLease(
    subscriberId: string,
    appliedPosition: bigint,
    leaseMs: number,
    call?: CallScope,
  ): Promise<{ requiredPosition: bigint; extended: boolean }> {
    return this.db.transaction(async (tx) => {
      // Under the changes' lock: every change committed before is visible to the next statement, and
      // every change committed after it finds this lease when its writer checks the caches.
      await tx.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [this.cacheLogLock]);
      // A cache still behind a change committed a whole lease ago is not extended: its stream is not
      // delivering, and a write must not wait on it for longer than its lease.
      const { rows } = await tx.query<{ required: bigint | null; extended: boolean }>(
        `WITH behind AS (
           SELECT EXISTS (SELECT 1 FROM cache_changes WHERE position > $2 AND created_at < clock_timestamp() - $3::integer * interval '1 millisecond') AS stuck),
         renewed AS (
           INSERT INTO cache_subscribers (id, applied_position, lease_until)
           VALUES ($1, $2, CASE WHEN (SELECT stuck FROM behind) THEN '-infinity' ELSE clock_timestamp() + $3::integer * interval '1 millisecond' END)
           ON CONFLICT (id) DO UPDATE SET applied_position = greatest(cache_subscribers.applied_position, EXCLUDED.applied_position),
             lease_until = greatest(cache_subscribers.lease_until, EXCLUDED.lease_until)
           RETURNING 1)
         SELECT (SELECT max(position) FROM cache_changes) AS required, NOT (SELECT stuck FROM behind) AS extended, pg_notify($4, '') FROM renewed`,
        [subscriberId, appliedPosition, leaseMs, this.cacheAcksChannel],
      );
      return { requiredPosition: BigInt(rows[0]?.required ?? 0n), extended: rows[0]?.extended ?? false };
    }, call);
  }

  async releaseCacheLease(subscriberId: string): Promise<void> {
    // Shortening a lease needs no lock: the cache has already stopped answering. The writes waiting wake up.
    await this.db.query(
      `WITH released AS (UPDATE cache_subscribers SET lease_until = '-infinity' WHERE id = $1 RETURNING 1) SELECT pg_notify($2, '') FROM released`,
      [subscriberId, this.cacheAcksChannel],
    );
  }

  async cachesBehind(position: bigint | undefined): Promise<{ position: bigint; behind: number; untilMs: number }> {
    const { rows } = await this.db.query<{ position: bigint; behind: bigint; until_ms: number | null }>(
      `WITH target AS (SELECT coalesce($1::bigint, (SELECT max(position) FROM cache_changes), 0) AS position)
       SELECT (SELECT position FROM target) AS position, count(*)::bigint AS behind,
         ceil(extract(epoch FROM max(lease_until) - clock_timestamp()) * 1000)::integer AS until_ms
       FROM cache_subscribers WHERE lease_until > clock_timestamp() AND applied_position < (SELECT position FROM target)`,
      [position ?? null],
    );
    const row = rows[0]!;
    return { position: BigInt(row.position), behind: Number(row.behind), untilMs: Math.max(0, row.until_ms ?? 0) };
  }

  watchCacheAcks(onAck: () => void): Promise<() => Promise<void>> {
    return this.db.listen(
      this.cacheAcksChannel,
      () => onAck(),
      () => onAck(),
    );
  }
}
