// A throwaway schema on the PostgreSQL server (DATABASE_URL) for a suite: the suite skips, saying
// why, without a server; every database it opened is closed and the schema dropped after it.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { openSqlDatabase, type SqlDatabase } from "@switchyard/platform/store";

const ROWS = [{ version: 1, name: "rows", sql: "CREATE TABLE rows (id int PRIMARY KEY, n int NOT NULL)" }];

export interface ServerSchemaOptions {
  maxConnections?: number;
  /** Another address for the same database (through a gate, say). */
  databaseUrl?: string;
}

/** Call inside a `describe`: registers its before/after hooks; `open` opens the schema (one table, `rows`). */
export function serverSchemaSuite(what: string): {
  url: string | undefined;
  open(options?: ServerSchemaOptions): Promise<SqlDatabase>;
} {
  const url = process.env.DATABASE_URL;
  const schema = `t_${randomBytes(6).toString("hex")}`;
  const opened: SqlDatabase[] = [];
  before(function () {
    if (!url) {
      console.log(`  (${what} skipped: DATABASE_URL is not set)`);
      this.skip();
    }
  });
  after(async () => {
    for (const db of opened) await db.close();
    if (!url) return;
    const client = new pg.Client(url);
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await client.end();
  });
  return {
    url,
    async open(options = {}) {
      const db = await openSqlDatabase({
        databaseUrl: options.databaseUrl ?? url,
        schema,
        migrations: ROWS,
        ...(options.maxConnections ? { maxConnections: options.maxConnections } : {}),
      });
      opened.push(db);
      return db;
    },
  };
}
