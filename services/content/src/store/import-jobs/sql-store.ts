// ImportJobStore on the PostgreSQL-family adapter. A job is made under its Idempotency-Key
// (runIdempotent); each chunk's catalog writes, the job's progress and its errors, and the cache
// change they make commit in one transaction, under the runner's lease.
import { jsonResultCodec, runIdempotent, type KeyedRequest, type SqlDatabase } from "@switchyard/platform/store";
import { newId } from "@switchyard/platform/ids.js";
import {
  MAX_JOB_ERRORS,
  type ImportJobStatus,
  type ImportLineInput,
  type LineErrorCode,
} from "../../domain/imports.js";
import { CATALOG_CHANGE, type CacheChangeRecorder } from "../cache-log/sql-store.js";
import { upsertCatalogItemIn } from "../catalog/sql-store.js";
import { NOW } from "../sql-clock.js";
import type { ImportChunk, ImportChunkStep, ImportJobRecord, ImportJobStore } from "./port.js";

interface ImportJobRow {
  id: string;
  tenant_id: string;
  created_by: bigint;
  status: ImportJobStatus;
  received: number;
  imported: number;
  failed: number;
  failure_message: string | null;
  created_at: Date;
  updated_at: Date;
}
interface ImportLineRow {
  line: number;
  request: Uint8Array | null;
  problem_code: string | null;
  problem_message: string | null;
}

const IMPORT_JOB_COLUMNS =
  "id, tenant_id, created_by, status, received, imported, failed, failure_message, created_at, updated_at";
const CREATE_IMPORT_JOB = "content.create-import-job";
const importJobCodec = jsonResultCodec<{ id: string }>();

export class SqlImportJobStore implements ImportJobStore {
  constructor(
    private readonly db: SqlDatabase,
    private readonly cacheLog: CacheChangeRecorder,
  ) {}

  async createImportJob(
    tenantId: string,
    createdBy: bigint,
    idempotency: KeyedRequest<{ id: string }>,
    lines: readonly ImportLineInput[],
  ): Promise<{ job: ImportJobRecord; replayed: boolean }> {
    const { result, replayed } = await runIdempotent(
      this.db,
      { tenantId, operation: CREATE_IMPORT_JOB, ...idempotency },
      importJobCodec,
      async (tx) => {
        const id = newId("imp");
        await tx.query(
          `INSERT INTO import_jobs (id, tenant_id, created_by, status, received) VALUES ($1, $2, $3, 'queued', $4)`,
          [id, tenantId, createdBy, lines.length],
        );
        // Every line in one statement (one JSON parameter: both drivers pass it alike, bytes as base64).
        const rows = lines.map((l, position) => ({
          position,
          line: l.line,
          request: l.request ? Buffer.from(l.request).toString("base64") : null,
          problem_code: l.problem?.code ?? null,
          problem_message: l.problem?.message ?? null,
        }));
        await tx.query(
          `INSERT INTO import_job_lines (job_id, position, line, request, problem_code, problem_message)
         SELECT $1, t.position, t.line, decode(t.request, 'base64'), t.problem_code, t.problem_message
         FROM jsonb_to_recordset($2::jsonb) AS t(position integer, line integer, request text, problem_code text, problem_message text)`,
          [id, JSON.stringify(rows)],
        );
        return { id };
      },
    );
    const job = await this.getImportJob(tenantId, result.id);
    if (!job) throw new Error(`import job ${result.id} vanished`);
    return { job, replayed };
  }

  async getImportJob(tenantId: string, id: string): Promise<ImportJobRecord | undefined> {
    const { rows } = await this.db.query<ImportJobRow>(
      `SELECT ${IMPORT_JOB_COLUMNS} FROM import_jobs WHERE id = $1 AND tenant_id = $2`,
      [id, tenantId],
    );
    const row = rows[0];
    if (!row) return undefined;
    const errors = await this.db.query<{ line: number; code: string; message: string }>(
      `SELECT line, code, message FROM import_job_errors WHERE job_id = $1 ORDER BY line LIMIT $2`,
      [id, MAX_JOB_ERRORS],
    );
    return {
      id: row.id,
      tenantId: row.tenant_id,
      createdBy: row.created_by,
      status: row.status,
      received: row.received,
      imported: row.imported,
      failed: row.failed,
      errors: errors.rows,
      failureMessage: row.failure_message,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
    };
  }

  async expireImportLeases(): Promise<number> {
    const { rowCount } = await this.db.query(
      `UPDATE import_jobs SET lease_until = '-infinity' WHERE status = 'running'`,
    );
    return rowCount;
  }

  claimImportJob(
    runner: string,
    leaseMs: number,
    maxInterruptions: number,
  ): Promise<{ claimed?: { id: string; interrupted: boolean }; failed: string[] }> {
    return this.db.transaction(async (tx) => {
      const failed: string[] = [];
      for (;;) {
        // Oldest first; a job another runner is claiming or running a chunk of right now is skipped.
        const { rows } = await tx.query<{ id: string; status: ImportJobStatus; interruptions: number }>(
          `SELECT id, status, interruptions FROM import_jobs
           WHERE status = 'queued' OR (status = 'running' AND lease_until < clock_timestamp())
           ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED`,
        );
        const job = rows[0];
        if (!job) return { failed };
        const interrupted = job.status === "running";
        if (interrupted && job.interruptions + 1 >= maxInterruptions) {
          await tx.query(
            `UPDATE import_jobs SET status = 'failed', interruptions = interruptions + 1, lease_owner = NULL, lease_until = NULL, updated_at = ${NOW},
               failure_message = $2
             WHERE id = $1`,
            [
              job.id,
              `the import was interrupted ${maxInterruptions} times (the content service stopped while running it); lines before the interruption stay imported`,
            ],
          );
          await tx.query(`DELETE FROM import_job_lines WHERE job_id = $1`, [job.id]);
          failed.push(job.id);
          continue;
        }
        await tx.query(
          `UPDATE import_jobs SET status = 'running', interruptions = interruptions + $2, lease_owner = $3,
             lease_until = clock_timestamp() + $4::integer * interval '1 millisecond', updated_at = ${NOW}
           WHERE id = $1`,
          [job.id, interrupted ? 1 : 0, runner, leaseMs],
        );
        return { claimed: { id: job.id, interrupted }, failed };
      }
    });
  }

  runImportChunk({ jobId, runner, leaseMs, lines: limit, work }: ImportChunk): Promise<ImportChunkStep> {
    return this.db.transaction(async (tx) => {
      const held = await tx.query<{ next_position: number; received: number; failed: number }>(
        `SELECT next_position, received, failed FROM import_jobs WHERE id = $1 AND status = 'running' AND lease_owner = $2 FOR UPDATE`,
        [jobId, runner],
      );
      const job = held.rows[0];
      if (!job) return "lost";
      const { rows } = await tx.query<ImportLineRow>(
        `SELECT line, request, problem_code, problem_message FROM import_job_lines WHERE job_id = $1 AND position >= $2 ORDER BY position LIMIT $3`,
        [jobId, job.next_position, limit],
      );
      const lines: ImportLineInput[] = rows.map((r) =>
        r.request
          ? { line: r.line, request: r.request }
          : { line: r.line, problem: { code: r.problem_code as LineErrorCode, message: r.problem_message ?? "" } },
      );
      const outcome = await work(lines, { upsertCatalogItem: (item) => upsertCatalogItemIn(tx, item) });
      const room = Math.max(0, MAX_JOB_ERRORS - job.failed);
      const kept = outcome.errors.slice(0, room);
      if (kept.length > 0) {
        await tx.query(
          `INSERT INTO import_job_errors (job_id, line, code, message)
           SELECT $1, t.line, t.code, t.message FROM jsonb_to_recordset($2::jsonb) AS t(line integer, code text, message text)
           ON CONFLICT DO NOTHING`,
          [jobId, JSON.stringify(kept)],
        );
      }
      const next = job.next_position + lines.length;
      const done = next >= job.received || lines.length === 0;
      // A job whose lines have all run stays running (held) until completeImportJob: it succeeds only
      // once the edge caches have applied its changes (import-jobs.ts).
      await tx.query(
        `UPDATE import_jobs SET next_position = $2, imported = imported + $3, failed = failed + $4, updated_at = ${NOW},
           lease_until = clock_timestamp() + $5::integer * interval '1 millisecond'
         WHERE id = $1`,
        [jobId, next, outcome.imported, outcome.errors.length, leaseMs],
      );
      if (done) await tx.query(`DELETE FROM import_job_lines WHERE job_id = $1`, [jobId]);
      if (outcome.imported > 0) await this.cacheLog.record(tx, CATALOG_CHANGE);
      return done ? "done" : "more";
    });
  }

  async completeImportJob(jobId: string, runner: string): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `UPDATE import_jobs SET status = 'succeeded', lease_owner = NULL, lease_until = NULL, updated_at = ${NOW}
       WHERE id = $1 AND status = 'running' AND lease_owner = $2`,
      [jobId, runner],
    );
    return rowCount > 0;
  }

  async releaseImportJob(jobId: string, runner: string): Promise<void> {
    await this.db.query(
      `UPDATE import_jobs SET status = 'queued', lease_owner = NULL, lease_until = NULL, updated_at = ${NOW} WHERE id = $1 AND status = 'running' AND lease_owner = $2`,
      [jobId, runner],
    );
  }
}
