import type { CallScope } from "@switchyard/platform/call-deadline.js";
// The edge caches' side of content's storage: the log of changes to cached data (every write of a
// document or the catalog records one) and the caches' leases on what they serve.

/** What an edge cache must drop: every catalog page, or one document's representations. */
export type CacheChangeKind = "catalog" | "document";

export interface CacheChangeRecord {
  /** Strictly increasing in commit order. */
  position: bigint;
  kind: CacheChangeKind;
  /** The document's tenant and id ("" for the catalog). */
  tenantId: string;
  id: string;
}

export interface CacheLogStore {
  /** The position of the last cache change committed (0 when none). */
  latestCacheChange(): Promise<bigint>;
  /** The cache changes after `position`, oldest first, at most `limit`. */
  cacheChangesAfter(position: bigint, limit: number): Promise<CacheChangeRecord[]>;
  /** Calls `onChange` when a cache change may have been committed by any replica, or gone unannounced (a wake-up: read the log); resolves to the stop function. */
  watchCacheChanges(onChange: () => void): Promise<() => Promise<void>>;
  /** Forgets changes older than `olderThanMs` (never the last one) and caches whose lease ended that long ago. */
  pruneCacheLog(olderThanMs: number): Promise<void>;
  /**
   * Records that cache `subscriberId` applied every change up to `appliedPosition` (never moving it
   * back) and extends its lease to `leaseMs` from now — unless it is still behind a change committed
   * more than `leaseMs` ago (extended: false); answers the last change committed then. Taken under the
   * lock every change is recorded under: a change committed after it sees this lease.
   */
  renewCacheLease(
    subscriberId: string,
    appliedPosition: bigint,
    leaseMs: number,
    call?: CallScope,
  ): Promise<{ requiredPosition: bigint; extended: boolean }>;
  /** Ends the lease of cache `subscriberId` now (it stopped answering from memory). */
  releaseCacheLease(subscriberId: string): Promise<void>;
  /**
   * The caches whose lease is running and that have not applied `position` (the last change committed,
   * when undefined): how many, and in how many ms the last of their leases ends.
   */
  cachesBehind(position: bigint | undefined): Promise<{ position: bigint; behind: number; untilMs: number }>;
  /** Calls `onAck` when a cache renewed its lease on any replica (or one may have gone unannounced); resolves to the stop function. */
  watchCacheAcks(onAck: () => void): Promise<() => Promise<void>>;
}
