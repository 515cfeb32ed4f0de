// What the content service needs from storage.
import type { Keyset } from "@switchyard/platform/paging.js";
import type { KeyedRequest } from "@switchyard/platform/store";
import type { CatalogItemInput } from "../domain/content.js";
import type { ImportJobStatus, ImportLineError, ImportLineInput } from "../domain/imports.js";
import type { CatalogWriter } from "../catalog-import.js";

export interface DocumentRecord {
  id: string;
  tenantId: string;
  title: string;
  body: string;
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

export interface PostRecord {
  id: string;
  tenantId: string;
  authorId: bigint;
  title: string;
  body: string;
  createdAt: Date;
}

export interface CatalogItemRecord extends CatalogItemInput {
  updatedAt: Date;
}

export interface ImportJobRecord {
  id: string;
  tenantId: string;
  createdBy: bigint;
  status: ImportJobStatus;
  received: number;
  imported: number;
  failed: number;
  /** The first per-line errors (at most MAX_JOB_ERRORS), by line. */
  errors: ImportLineError[];
  failureMessage: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/** What one chunk of a job did: lines imported, and the lines refused. */
export interface ImportChunkOutcome {
  imported: number;
  errors: ImportLineError[];
}

/** "done": the job's last lines ran; it stays running, held, until completeImportJob. */
export type ImportChunkStep = "more" | "done" | "lost";

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

export interface ContentStore extends CatalogWriter {
  createDocument(tenantId: string, doc: { title: string; body: string }): Promise<DocumentRecord>;
  getDocument(tenantId: string, id: string): Promise<DocumentRecord | undefined>;
  /** The conditional write: applied only while the stored version is `expectedVersion` (any version when undefined). Records a cache change with it. */
  updateDocument(
    tenantId: string,
    id: string,
    doc: { title: string; body: string },
    expectedVersion: number | undefined,
  ): Promise<DocumentRecord | undefined>;
  /** Inserts the post and announces it on the store's notification channel in the same transaction. */
  createPost(tenantId: string, authorId: bigint, post: { title: string; body: string }): Promise<PostRecord>;
  getPost(tenantId: string, id: string): Promise<PostRecord | undefined>;
  /** Newest first, before the keyset position. */
  listPosts(tenantId: string, before: Keyset | undefined, limit: number): Promise<PostRecord[]>;
  /** Oldest first, after the keyset position (a watch resuming where it stopped). */
  listPostsAfter(tenantId: string, after: Keyset, limit: number): Promise<PostRecord[]>;
  /** How many posts come after the keyset position, counting no further than `limit`. */
  countPostsAfter(tenantId: string, after: Keyset, limit: number): Promise<number>;
  /** The position of the tenant's newest post; undefined when it has none. */
  newestPostPosition(tenantId: string): Promise<Keyset | undefined>;
  /**
   * Calls `onPost` for every post created by any replica on this database, and `onResync` when some
   * may have gone unannounced (the store's connection was lost); resolves to the stop function.
   */
  watchNewPosts(onPost: (tenantId: string, postId: string) => void, onResync: () => void): Promise<() => Promise<void>>;
  listCatalogItems(offset: number, limit: number): Promise<{ items: CatalogItemRecord[]; total: number }>;
  /** The catalog items with these skus (any order; skus not in the catalog are absent). */
  getCatalogItems(skus: readonly string[]): Promise<CatalogItemRecord[]>;
  /** Creates or replaces by sku, recording a cache change with it; true when it was created. */
  upsertCatalogItem(item: CatalogItemInput): Promise<boolean>;

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

  /**
   * Records a queued job with its lines, once per (tenant, idempotency key): a retry with the same
   * request hash gets the job made first (replayed), another request IDEMPOTENCY_KEY_REUSED.
   */
  createImportJob(
    tenantId: string,
    createdBy: bigint,
    idempotency: KeyedRequest<{ id: string }>,
    lines: readonly ImportLineInput[],
  ): Promise<{ job: ImportJobRecord; replayed: boolean }>;
  getImportJob(tenantId: string, id: string): Promise<ImportJobRecord | undefined>;
  /** Takes every running job's lease away (embedded storage at start: no other process can be running one). */
  expireImportLeases(): Promise<number>;
  /**
   * Claims the oldest job that is queued, or running with its lease run out (an interruption), for
   * `runner` for `leaseMs`. A job that would reach `maxInterruptions` fails instead (its id is in `failed`).
   */
  claimImportJob(
    runner: string,
    leaseMs: number,
    maxInterruptions: number,
  ): Promise<{ claimed?: { id: string; interrupted: boolean }; failed: string[] }>;
  /**
   * Runs the next `limit` lines of a job `runner` holds, in one transaction with what `work` writes
   * through the catalog writer it is given, the job's progress and its errors; renews the lease.
   * "done" when that was the last of them (the job succeeded), "lost" when the runner no longer holds the job.
   */
  runImportChunk(
    jobId: string,
    runner: string,
    leaseMs: number,
    limit: number,
    work: (lines: ImportLineInput[], catalog: CatalogWriter) => Promise<ImportChunkOutcome>,
  ): Promise<ImportChunkStep>;
  /** Marks a job `runner` holds, whose lines have all run, succeeded; false when it no longer holds it. */
  completeImportJob(jobId: string, runner: string): Promise<boolean>;
  /** Gives a job `runner` holds back to the queue (a runner stopping cleanly). */
  releaseImportJob(jobId: string, runner: string): Promise<void>;
}
