// Catalog import jobs in content's storage: a job's lines, queued once per Idempotency-Key, run in
// chunks by whichever runner holds the job's lease.
import type { KeyedRequest } from "@switchyard/platform/store";
import type { ImportJobStatus, ImportLineError, ImportLineInput } from "../../domain/imports.js";
import type { CatalogWriter } from "../../catalog-import.js";

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

/** One chunk of a job a runner holds: its next `lines` lines, run by `work`; the lease renewed for `leaseMs`. */
export interface ImportChunk {
  jobId: string;
  runner: string;
  leaseMs: number;
  lines: number;
  work: (lines: ImportLineInput[], catalog: CatalogWriter) => Promise<ImportChunkOutcome>;
}

/** "done": the job's last lines ran; it stays running, held, until completeImportJob. */
export type ImportChunkStep = "more" | "done" | "lost";

export interface ImportJobStore {
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
   * Runs the next lines of a job the runner holds, in one transaction with what `work` writes
   * through the catalog writer it is given, the job's progress and its errors; renews the lease.
   * "done" when that was the last of them (the job succeeded), "lost" when the runner no longer holds the job.
   */
  runImportChunk(chunk: ImportChunk): Promise<ImportChunkStep>;
  /** Marks a job `runner` holds, whose lines have all run, succeeded; false when it no longer holds it. */
  completeImportJob(jobId: string, runner: string): Promise<boolean>;
  /** Gives a job `runner` holds back to the queue (a runner stopping cleanly). */
  releaseImportJob(jobId: string, runner: string): Promise<void>;
}
