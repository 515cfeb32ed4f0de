// Feed page cost at depth: the content store's keyset page on a 1,000,000-post table, first page
// vs a page ~90% deep, with offset paging at the same depth beside it for contrast (target: the deep
// keyset page within 1.2× of the first). Runs against embedded PGlite, or DATABASE_URL when set.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { openSqlDatabase, type SqlDatabase } from "@switchyard/platform/store";
import { contentMigrations } from "@switchyard/content/store/migrations.js";
import { SqlPostStore } from "@switchyard/content/store/posts/sql-store.js";

export interface FeedDepthResult {
  engine: string;
  rows: number;
  pageSize: number;
  firstPageMs: number;
  deepKeysetMs: number;
  deepOffsetMs: number;
  keysetDepthRatio: number;
  offsetDepthRatio: number;
  target: number;
  pass: boolean;
}

const TENANT = "bench";

async function median(samples: number, run: () => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < samples; i++) {
    const started = performance.now();
    await run();
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

async function seed(db: SqlDatabase, rows: number): Promise<void> {
  // One statement per 100k rows: ids sort like their time, one post every millisecond.
  for (let start = 0; start < rows; start += 100_000) {
    await db.query(
      `INSERT INTO posts (id, tenant_id, author_id, title, body, created_at)
       SELECT 'post_' || lpad(g::text, 16, '0'), $1, 1, 'title ' || g, 'body', timestamptz '2026-01-01' + g * interval '1 millisecond'
       FROM generate_series($2::int, $3::int) AS g`,
      [TENANT, start + 1, Math.min(rows, start + 100_000)],
    );
  }
  await db.query("ANALYZE posts");
}

export async function measureFeedDepth(
  options: { rows?: number; pageSize?: number; databaseUrl?: string | undefined; log?: (line: string) => void } = {},
): Promise<FeedDepthResult> {
  const rows = options.rows ?? 1_000_000;
  const pageSize = options.pageSize ?? 20;
  const log = options.log ?? (() => {});
  const dataDir = mkdtempSync(join(tmpdir(), "switchyard-feed-depth-"));
  const schema = `bench_feed_${randomBytes(3).toString("hex")}`;
  const db = await openSqlDatabase({
    databaseUrl: options.databaseUrl,
    dataDir: options.databaseUrl ? undefined : dataDir,
    schema,
    migrations: contentMigrations,
  });
  try {
    const started = performance.now();
    await seed(db, rows);
    log(`  seeded ${rows.toLocaleString("en")} posts in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const store = new SqlPostStore(db);
    const depth = Math.floor(rows * 0.9);
    // The keyset position of the row `offset` places from the newest.
    const positionAt = async (offset: number) => {
      const row = (
        await db.query<{ id: string; created_at: Date }>(
          `SELECT id, created_at FROM posts WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT 1`,
          [TENANT, offset],
        )
      ).rows[0]!;
      return { createdAt: row.created_at, id: row.id };
    };
    // The same statement near the top (the page after the first) and ~90% deep: only the depth differs.
    const near = await positionAt(pageSize - 1);
    const deep = await positionAt(depth);
    const samples = 41;
    await median(9, () => store.listPosts(TENANT, near, pageSize + 1));
    await median(9, () => store.listPosts(TENANT, deep, pageSize + 1));
    const firstPageMs = await median(samples, () => store.listPosts(TENANT, near, pageSize + 1));
    const deepKeysetMs = await median(samples, () => store.listPosts(TENANT, deep, pageSize + 1));
    const deepOffsetMs = await median(5, () =>
      db.query(`SELECT id FROM posts WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC OFFSET $2 LIMIT $3`, [
        TENANT,
        depth,
        pageSize + 1,
      ]),
    );
    const keysetDepthRatio = deepKeysetMs / firstPageMs;
    return {
      engine: db.engine,
      rows,
      pageSize,
      firstPageMs,
      deepKeysetMs,
      deepOffsetMs,
      keysetDepthRatio,
      offsetDepthRatio: deepOffsetMs / firstPageMs,
      target: 1.2,
      pass: keysetDepthRatio <= 1.2,
    };
  } finally {
    if (options.databaseUrl) await db.query(`DROP SCHEMA ${schema} CASCADE`).catch(() => {});
    await db.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

// `tsx bench/feed-depth.ts` runs it alone.
if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await measureFeedDepth({
    databaseUrl: process.env.DATABASE_URL || undefined,
    log: console.log,
    rows: Number(process.env.FEED_ROWS ?? 1_000_000),
  });
  console.log(
    `feed page at ~90% depth of ${result.rows.toLocaleString("en")} posts (${result.engine}): first ${result.firstPageMs.toFixed(2)} ms, keyset deep ${result.deepKeysetMs.toFixed(2)} ms (${result.keysetDepthRatio.toFixed(2)}× — target ≤ ${result.target}×: ${result.pass ? "PASS" : "MISS"}), offset deep ${result.deepOffsetMs.toFixed(1)} ms (${result.offsetDepthRatio.toFixed(0)}×, for contrast)`,
  );
}
