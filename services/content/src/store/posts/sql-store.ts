// PostStore on the PostgreSQL-family adapter. New posts are announced with NOTIFY so that every
// replica's watchers see them.
import { KeysetPageQuery, type SqlDatabase } from "@switchyard/platform/store";
import { newId } from "@switchyard/platform/ids.js";
import type { Keyset } from "@switchyard/platform/paging.js";
import type { PostRecord, PostStore } from "./port.js";
import type { CallScope } from "@switchyard/platform/call-deadline.js";

const POST_COLUMNS = "id, tenant_id, author_id, title, body, created_at";
const TENANT_POSTS = { select: `SELECT ${POST_COLUMNS} FROM posts`, where: "tenant_id = $1" };
/** The feed's pages, and a watch catching up from a position. */
const POSTS_PAGE = new KeysetPageQuery({ ...TENANT_POSTS, order: "newest first" });
const POSTS_SINCE = new KeysetPageQuery({ ...TENANT_POSTS, order: "oldest first" });

interface PostRow {
  id: string;
  tenant_id: string;
  author_id: bigint;
  title: string;
  body: string;
  created_at: Date;
}

const toPost = (r: PostRow): PostRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  authorId: r.author_id,
  title: r.title,
  body: r.body,
  createdAt: r.created_at,
});

export class SqlPostStore implements PostStore {
  private readonly postsChannel: string;

  constructor(private readonly db: SqlDatabase) {
    this.postsChannel = `${db.schema}_new_posts`;
  }

  createPost(
    tenantId: string,
    authorId: bigint,
    post: { title: string; body: string },
    call?: CallScope,
  ): Promise<PostRecord> {
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
    }, call);
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
}
