// ContentStore on the PostgreSQL-family adapter. Document updates are conditional writes on the
// stored version; new posts are announced with NOTIFY so that every replica's watchers see them.
import type { SqlDatabase } from "@switchyard/platform/store";
import { newId } from "@switchyard/platform/ids.js";
import type { Keyset } from "@switchyard/platform/paging.js";
import type { CatalogItemInput } from "../domain/content.js";
import type { CatalogItemRecord, ContentStore, DocumentRecord, PostRecord } from "./port.js";

const DOC_COLUMNS = "id, tenant_id, title, body, version, created_at, updated_at";
const POST_COLUMNS = "id, tenant_id, author_id, title, body, created_at";

interface DocRow { id: string; tenant_id: string; title: string; body: string; version: number; created_at: Date; updated_at: Date }
interface PostRow { id: string; tenant_id: string; author_id: bigint; title: string; body: string; created_at: Date }

const toDoc = (r: DocRow): DocumentRecord => ({ id: r.id, tenantId: r.tenant_id, title: r.title, body: r.body, version: r.version, createdAt: r.created_at, updatedAt: r.updated_at });
const toPost = (r: PostRow): PostRecord => ({ id: r.id, tenantId: r.tenant_id, authorId: r.author_id, title: r.title, body: r.body, createdAt: r.created_at });

export class SqlContentStore implements ContentStore {
  private readonly postsChannel: string;

  constructor(private readonly db: SqlDatabase) {
    this.postsChannel = `${db.schema}_new_posts`;
  }

  async createDocument(tenantId: string, doc: { title: string; body: string }): Promise<DocumentRecord> {
    const { rows } = await this.db.query<DocRow>(`INSERT INTO documents (id, tenant_id, title, body) VALUES ($1, $2, $3, $4) RETURNING ${DOC_COLUMNS}`, [newId("doc"), tenantId, doc.title, doc.body]);
    return toDoc(rows[0]!);
  }

  async getDocument(tenantId: string, id: string): Promise<DocumentRecord | undefined> {
    const { rows } = await this.db.query<DocRow>(`SELECT ${DOC_COLUMNS} FROM documents WHERE id = $1 AND tenant_id = $2`, [id, tenantId]);
    return rows[0] && toDoc(rows[0]);
  }

  async updateDocument(tenantId: string, id: string, doc: { title: string; body: string }, expectedVersion: number | undefined): Promise<DocumentRecord | undefined> {
    const { rows } = await this.db.query<DocRow>(
      `UPDATE documents SET title = $3, body = $4, version = version + 1, updated_at = date_trunc('milliseconds', clock_timestamp())
       WHERE id = $1 AND tenant_id = $2 AND ($5::integer IS NULL OR version = $5)
       RETURNING ${DOC_COLUMNS}`,
      [id, tenantId, doc.title, doc.body, expectedVersion ?? null],
    );
    return rows[0] && toDoc(rows[0]);
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
    const { rows } = await this.db.query<PostRow>(`SELECT ${POST_COLUMNS} FROM posts WHERE id = $1 AND tenant_id = $2`, [id, tenantId]);
    return rows[0] && toPost(rows[0]);
  }

  async listPosts(tenantId: string, before: Keyset | undefined, limit: number): Promise<PostRecord[]> {
    const { rows } = before
      ? await this.db.query<PostRow>(`SELECT ${POST_COLUMNS} FROM posts WHERE tenant_id = $1 AND (created_at, id) < ($2, $3) ORDER BY created_at DESC, id DESC LIMIT $4`, [tenantId, before.createdAt, before.id, limit])
      : await this.db.query<PostRow>(`SELECT ${POST_COLUMNS} FROM posts WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2`, [tenantId, limit]);
    return rows.map(toPost);
  }

  async listPostsAfter(tenantId: string, after: Keyset, limit: number): Promise<PostRecord[]> {
    const { rows } = await this.db.query<PostRow>(`SELECT ${POST_COLUMNS} FROM posts WHERE tenant_id = $1 AND (created_at, id) > ($2, $3) ORDER BY created_at ASC, id ASC LIMIT $4`, [tenantId, after.createdAt, after.id, limit]);
    return rows.map(toPost);
  }

  async countPostsAfter(tenantId: string, after: Keyset, limit: number): Promise<number> {
    const { rows } = await this.db.query<{ n: bigint }>(
      `SELECT count(*)::bigint AS n FROM (SELECT 1 FROM posts WHERE tenant_id = $1 AND (created_at, id) > ($2, $3) LIMIT $4) AS later`,
      [tenantId, after.createdAt, after.id, limit],
    );
    return Number(rows[0]?.n ?? 0n);
  }

  watchNewPosts(onPost: (tenantId: string, postId: string) => void): Promise<() => Promise<void>> {
    return this.db.listen(this.postsChannel, (payload) => {
      try {
        const { t, i } = JSON.parse(payload) as { t: string; i: string };
        if (typeof t === "string" && typeof i === "string") onPost(t, i);
      } catch {
        // Not ours: ignore.
      }
    });
  }

  async listCatalogItems(offset: number, limit: number): Promise<{ items: CatalogItemRecord[]; total: number }> {
    const page = await this.db.query<{ sku: string; name: string; price: bigint; currency: string; updated_at: Date }>(`SELECT sku, name, price, currency, updated_at FROM catalog_items ORDER BY sku LIMIT $1 OFFSET $2`, [limit, offset]);
    const count = await this.db.query<{ n: bigint }>(`SELECT count(*)::bigint AS n FROM catalog_items`);
    return { items: page.rows.map((r) => ({ sku: r.sku, name: r.name, price: r.price, currency: r.currency, updatedAt: r.updated_at })), total: Number(count.rows[0]?.n ?? 0n) };
  }

  async getCatalogItems(skus: readonly string[]): Promise<CatalogItemRecord[]> {
    if (skus.length === 0) return [];
    const { rows } = await this.db.query<{ sku: string; name: string; price: bigint; currency: string; updated_at: Date }>(`SELECT sku, name, price, currency, updated_at FROM catalog_items WHERE sku = ANY($1::text[])`, [skus]);
    return rows.map((r) => ({ sku: r.sku, name: r.name, price: r.price, currency: r.currency, updatedAt: r.updated_at }));
  }

  async upsertCatalogItem(item: CatalogItemInput): Promise<boolean> {
    const { rows } = await this.db.query<{ created: boolean }>(
      `INSERT INTO catalog_items (sku, name, price, currency) VALUES ($1, $2, $3, $4)
       ON CONFLICT (sku) DO UPDATE SET name = EXCLUDED.name, price = EXCLUDED.price, currency = EXCLUDED.currency, updated_at = date_trunc('milliseconds', clock_timestamp())
       RETURNING (xmax = 0) AS created`,
      [item.sku, item.name.trim(), item.price, item.currency],
    );
    return rows[0]!.created;
  }
}
