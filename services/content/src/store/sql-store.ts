// ContentStore on the PostgreSQL-family adapter. Document updates are conditional writes on the
// stored version; new posts are announced with NOTIFY so that every replica's watchers see them.
import {
  jsonResultCodec,
  KeysetPageQuery,
  runIdempotent,
  type KeyedRequest,
  type SqlDatabase,
  type SqlExecutor,
} from "@switchyard/platform/store";
import { newId } from "@switchyard/platform/ids.js";
import type { Keyset } from "@switchyard/platform/paging.js";
import type { CatalogItemInput } from "../domain/content.js";
import { MAX_JOB_ERRORS, type ImportJobStatus, type ImportLineInput, type LineErrorCode } from "../domain/imports.js";
import type { CatalogWriter } from "../catalog-import.js";
import type {
  CacheChangeKind,
  CacheChangeRecord,
  CatalogItemRecord,
  ContentStore,
  DocumentRecord,
  ImportChunkOutcome,
  ImportChunkStep,
  ImportJobRecord,
  PostRecord,
} from "./port.js";

const DOC_COLUMNS = "id, tenant_id, title, body, version, created_at, updated_at";
const POST_COLUMNS = "id, tenant_id, author_id, title, body, created_at";
const POSTS_PAGE = new KeysetPageQuery({
  select: `SELECT ${POST_COLUMNS} FROM posts`,
  where: "tenant_id = $1",
  order: "newest first",
});
const POSTS_SINCE = new KeysetPageQuery({
  select: `SELECT ${POST_COLUMNS} FROM posts`,
  where: "tenant_id = $1",
  order: "oldest first",
});

interface DocRow {
  id: string;
  tenant_id: string;
  title: string;
  body: string;
  version: number;
  created_at: Date;
  updated_at: Date;
}
interface PostRow {
  id: string;
  tenant_id: string;
  author_id: bigint;
  title: string;
  body: string;
  created_at: Date;
}

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
const NOW = "date_trunc('milliseconds', clock_timestamp())";

async function upsertCatalogItemWith(db: SqlExecutor, item: CatalogItemInput): Promise<boolean> {
  const { rows } = await db.query<{ created: boolean }>(
    `INSERT INTO catalog_items (sku, name, price, currency) VALUES ($1, $2, $3, $4)
     ON CONFLICT (sku) DO UPDATE SET name = EXCLUDED.name, price = EXCLUDED.price, currency = EXCLUDED.currency, updated_at = ${NOW}
     RETURNING (xmax = 0) AS created`,
    [item.sku, item.name.trim(), item.price, item.currency],
  );
  return rows[0]!.created;
}

const toDoc = (r: DocRow): DocumentRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  title: r.title,
  body: r.body,
  version: r.version,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});
const toPost = (r: PostRow): PostRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  authorId: r.author_id,
  title: r.title,
  body: r.body,
  createdAt: r.created_at,
});

export class SqlContentStore implements ContentStore {
  private readonly postsChannel: string;
  private readonly cacheChangesChannel: string;
  private readonly cacheAcksChannel: string;
  /** The advisory lock every cache change and every lease renewal is taken under (see recordCacheChange). */
  private readonly cacheLogLock: string;

  constructor(private readonly db: SqlDatabase) {
    this.postsChannel = `${db.schema}_new_posts`;
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
  private async recordCacheChange(tx: SqlExecutor, kind: CacheChangeKind, tenantId = "", id = ""): Promise<void> {
    await tx.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [this.cacheLogLock]);
    // Delivered to every replica's listener when the transaction commits: a wake-up to read the log.
    await tx.query(
      `WITH c AS (INSERT INTO cache_changes (kind, tenant_id, id) VALUES ($1, $2, $3) RETURNING position) SELECT pg_notify($4, position::text) FROM c`,
      [kind, tenantId, id, this.cacheChangesChannel],
    );
  }

  async createDocument(tenantId: string, doc: { title: string; body: string }): Promise<DocumentRecord> {
    const { rows } = await this.db.query<DocRow>(
      `INSERT INTO documents (id, tenant_id, title, body) VALUES ($1, $2, $3, $4) RETURNING ${DOC_COLUMNS}`,
      [newId("doc"), tenantId, doc.title, doc.body],
    );
    return toDoc(rows[0]!);
  }

  async getDocument(tenantId: string, id: string): Promise<DocumentRecord | undefined> {
    const { rows } = await this.db.query<DocRow>(
      `SELECT ${DOC_COLUMNS} FROM documents WHERE id = $1 AND tenant_id = $2`,
      [id, tenantId],
    );
    return rows[0] && toDoc(rows[0]);
  }

  updateDocument(
    tenantId: string,
    id: string,
    doc: { title: string; body: string },
    expectedVersion: number | undefined,
  ): Promise<DocumentRecord | undefined> {
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<DocRow>(
        `UPDATE documents SET title = $3, body = $4, version = version + 1, updated_at = date_trunc('milliseconds', clock_timestamp())
         WHERE id = $1 AND tenant_id = $2 AND ($5::integer IS NULL OR version = $5)
         RETURNING ${DOC_COLUMNS}`,
        [id, tenantId, doc.title, doc.body, expectedVersion ?? null],
      );
      if (!rows[0]) return undefined;
      await this.recordCacheChange(tx, "document", tenantId, id);
      return toDoc(rows[0]);
    });
  }

  createPost(tenantId: string, authorId: bigint, post: { title: string; body: string }): Promise<PostRecord> {
    return this.db.transaction(async (tx) => {
      // A tenant's posts are made one at a time, each later than the one before (even within one
      // millisecond): the feed's order (created_at, id) is then the order posts become visible, so a
      // live stream never sees a post land behind one it has passed, nor a resumed one skip it.
      await tx.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [`${this.db.schema}.posts:${tenantId}`]);
      const { rows } = await tx.query<PostRow>(
        `INSERT INTO posts (id, tenant_id, author_id, title, body, created_at)
         VALUES ($1, $2, $3, $4, $5, greatest(date_trunc('milliseconds', clock_timestamp()), (SELECT max(created_at) + interval '1 millisecond' FROM posts WHERE tenant_id = $2)))
         RETURNING ${POST_COLUMNS}`,
        [newId("post"), tenantId, authorId, post.title, post.body],
      );
      const created = toPost(rows[0]!);
      // Delivered to every listener when this transaction commits, never before.
      await tx.query(`SELECT pg_notify($1, $2)`, [this.postsChannel, JSON.stringify({ t: tenantId, i: created.id })]);
      return created;
    });
  }

  async getPost(tenantId: string, id: string): Promise<PostRecord | undefined> {
    const { rows } = await this.db.query<PostRow>(
      `SELECT ${POST_COLUMNS} FROM posts WHERE id = $1 AND tenant_id = $2`,
      [id, tenantId],
    );
    return rows[0] && toPost(rows[0]);
  }

  async listPosts(tenantId: string, before: Keyset | undefined, limit: number): Promise<PostRecord[]> {
    const rows = await POSTS_PAGE.rows<PostRow>(this.db, [tenantId], { after: before, limit });
    return rows.map(toPost);
  }

  async listPostsAfter(tenantId: string, after: Keyset, limit: number): Promise<PostRecord[]> {
    const rows = await POSTS_SINCE.rows<PostRow>(this.db, [tenantId], { after, limit });
    return rows.map(toPost);
  }

  async countPostsAfter(tenantId: string, after: Keyset, limit: number): Promise<number> {
    const { rows } = await this.db.query<{ n: bigint }>(
      `SELECT count(*)::bigint AS n FROM (SELECT 1 FROM posts WHERE tenant_id = $1 AND (created_at, id) > ($2, $3) LIMIT $4) AS later`,
      [tenantId, after.createdAt, after.id, limit],
    );
    return Number(rows[0]?.n ?? 0n);
  }

  async newestPostPosition(tenantId: string): Promise<Keyset | undefined> {
    const { rows } = await this.db.query<{ created_at: Date; id: string }>(
      `SELECT created_at, id FROM posts WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC LIMIT 1`,
      [tenantId],
    );
    const row = rows[0];
    return row && { createdAt: row.created_at, id: row.id };
  }

  watchNewPosts(
    onPost: (tenantId: string, postId: string) => void,
    onResync: () => void,
  ): Promise<() => Promise<void>> {
    return this.db.listen(
      this.postsChannel,
      (payload) => {
        try {
          const { t, i } = JSON.parse(payload) as { t: string; i: string };
          if (typeof t === "string" && typeof i === "string") onPost(t, i);
        } catch {
          // Not ours: ignore.
        }
      },
      onResync,
    );
  }

  async listCatalogItems(offset: number, limit: number): Promise<{ items: CatalogItemRecord[]; total: number }> {
    const page = await this.db.query<{ sku: string; name: string; price: bigint; currency: string; updated_at: Date }>(
      `SELECT sku, name, price, currency, updated_at FROM catalog_items ORDER BY sku LIMIT $1 OFFSET $2`,
      [limit, offset],
    );
    const count = await this.db.query<{ n: bigint }>(`SELECT count(*)::bigint AS n FROM catalog_items`);
    return {
      items: page.rows.map((r) => ({
        sku: r.sku,
        name: r.name,
        price: r.price,
        currency: r.currency,
        updatedAt: r.updated_at,
      })),
      total: Number(count.rows[0]?.n ?? 0n),
    };
  }

  async getCatalogItems(skus: readonly string[]): Promise<CatalogItemRecord[]> {
    if (skus.length === 0) return [];
    const { rows } = await this.db.query<{
      sku: string;
      name: string;
      price: bigint;
      currency: string;
      updated_at: Date;
    }>(`SELECT sku, name, price, currency, updated_at FROM catalog_items WHERE sku = ANY($1::text[])`, [skus]);
    return rows.map((r) => ({
      sku: r.sku,
      name: r.name,
      price: r.price,
      currency: r.currency,
      updatedAt: r.updated_at,
    }));
  }

  upsertCatalogItem(item: CatalogItemInput): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const created = await upsertCatalogItemWith(tx, item);
      await this.recordCacheChange(tx, "catalog");
      return created;
    });
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
    });
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

  runImportChunk(
    jobId: string,
    runner: string,
    leaseMs: number,
    limit: number,
    work: (lines: ImportLineInput[], catalog: CatalogWriter) => Promise<ImportChunkOutcome>,
  ): Promise<ImportChunkStep> {
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
      const outcome = await work(lines, { upsertCatalogItem: (item) => upsertCatalogItemWith(tx, item) });
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
      if (outcome.imported > 0) await this.recordCacheChange(tx, "catalog");
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
