// Opens a service's database on the engine its configuration names — a PostgreSQL server when a
// DATABASE_URL is given, embedded PGlite otherwise — and brings its schema to what the code needs.
import type { Migration, SchemaAtStart, SqlDatabase } from "./engine.js";
import { applyMigrations, verifyMigrations } from "./migrator.js";
import { openPgliteDatabase } from "./pglite-database.js";
import { openPostgresDatabase } from "./postgres-database.js";

export interface OpenSqlOptions {
  /** postgres://… to use a server; undefined for embedded PGlite. */
  databaseUrl?: string | undefined;
  /** PGlite data directory; undefined keeps the embedded database in memory (tests). */
  dataDir?: string | undefined;
  /** Schema owned by the service (a lower-case identifier). */
  schema: string;
  migrations: readonly Migration[];
  /** Apply the migrations (default), or only verify they were applied (see SchemaAtStart). */
  schemaAtStart?: SchemaAtStart | undefined;
  /** Pool size for a PostgreSQL server (DATABASE_POOL_MAX); the LISTEN connection is one more. */
  maxConnections?: number | undefined;
}

export async function openSqlDatabase(options: OpenSqlOptions): Promise<SqlDatabase> {
  const db = options.databaseUrl
    ? openPostgresDatabase({
        databaseUrl: options.databaseUrl,
        schema: options.schema,
        maxConnections: options.maxConnections,
      })
    : await openPgliteDatabase(options.dataDir, options.schema);
  try {
    if (options.schemaAtStart === "verify") await verifyMigrations(db, options.migrations);
    else await applyMigrations(db, options.migrations);
  } catch (err) {
    await db.close();
    throw err;
  }
  return db;
}
