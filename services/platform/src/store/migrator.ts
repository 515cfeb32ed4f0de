// Versioned migrations of a service's schema. They are applied at start under an advisory lock so
// that replicas starting together do not race — or, where a deployment runs them as a step of their
// own before its rollout (`node dist/migrate.js`), only checked at start: a process refuses a schema
// older than its migrations and serves on a newer one (migrations are additive: expand, then contract
// a release later), so the previous release keeps working while the next one rolls out.
import type { Migration, SqlDatabase, SqlExecutor } from "./engine.js";
import { openPostgresDatabase } from "./postgres-database.js";

/** The schema lacks migrations this code needs: run them first (`node dist/migrate.js <service>`). */
export class SchemaBehindError extends Error {
  constructor(
    readonly schema: string,
    readonly missing: readonly Migration[],
    readonly appliedVersion: number,
  ) {
    const lacking = missing.map((m) => `${m.version} (${m.name})`).join(", ");
    super(
      `schema "${schema}" is at version ${appliedVersion} and lacks ${lacking}: ` +
        `this release needs version ${Math.max(...missing.map((m) => m.version))}. ` +
        "Run the migrations first (node dist/migrate.js), or start with DATABASE_MIGRATIONS=apply",
    );
  }
}

function checkVersions(migrations: readonly Migration[]): void {
  const versions = migrations.map((m) => m.version);
  if (new Set(versions).size !== versions.length) throw new Error("duplicate migration version");
}

/** Applies the migrations an open database lacks, in order, in one transaction; resolves to those applied. */
export function applyMigrations(db: SqlDatabase, migrations: readonly Migration[]): Promise<Migration[]> {
  checkVersions(migrations);
  return db.transaction(async (tx) => {
    // Replicas of one service starting together apply each migration once.
    await tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`switchyard.migrations.${db.schema}`]);
    // Created only when missing: a service's own role may own its schema without the right to create schemas.
    const exists = await tx.query(`SELECT 1 FROM pg_namespace WHERE nspname = $1`, [db.schema]);
    if (exists.rowCount === 0) await tx.query(`CREATE SCHEMA ${db.schema}`);
    await tx.query(`CREATE TABLE IF NOT EXISTS ${db.schema}.schema_migrations (
      version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const applied = await tx.query<{ version: number }>(`SELECT version FROM ${db.schema}.schema_migrations`);
    const done = new Set(applied.rows.map((r) => Number(r.version)));
    const applying: Migration[] = [];
    for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
      if (done.has(m.version)) continue;
      await tx.query(`SET LOCAL search_path TO ${db.schema}`);
      await tx.exec(m.sql);
      await tx.query(`INSERT INTO ${db.schema}.schema_migrations (version, name) VALUES ($1, $2)`, [m.version, m.name]);
      applying.push(m);
    }
    return applying;
  });
}

/** The versions applied to the schema (none when it was never migrated). */
export async function appliedVersions(db: SqlExecutor, schema: string): Promise<number[]> {
  const table = await db.query<{ present: boolean }>(`SELECT to_regclass($1) IS NOT NULL AS present`, [
    `${schema}.schema_migrations`,
  ]);
  if (!table.rows[0]?.present) return [];
  const rows = await db.query<{ version: number }>(`SELECT version FROM ${schema}.schema_migrations ORDER BY version`);
  return rows.rows.map((r) => Number(r.version));
}

/**
 * Refuses a schema that lacks any of the migrations (SchemaBehindError). One with migrations beyond
 * them is a newer release's, made additive: this release serves on it.
 */
export async function verifyMigrations(db: SqlDatabase, migrations: readonly Migration[]): Promise<void> {
  checkVersions(migrations);
  const applied = await appliedVersions(db, db.schema);
  const done = new Set(applied);
  const missing = migrations.filter((m) => !done.has(m.version)).sort((a, b) => a.version - b.version);
  if (missing.length > 0)
    throw new SchemaBehindError(db.schema, missing, applied.length > 0 ? Math.max(...applied) : 0);
}

/**
 * Migrates a schema and closes the connection: the migration step of a deployment (node dist/migrate.js),
 * run before a rollout with no probe's clock on it. Resolves to the migrations it applied and the
 * versions the schema then has.
 */
export async function migrateSchema(options: {
  databaseUrl: string;
  schema: string;
  migrations: readonly Migration[];
}): Promise<{ applied: Migration[]; versions: number[] }> {
  const db = openPostgresDatabase({ databaseUrl: options.databaseUrl, schema: options.schema, forMigrationStep: true });
  try {
    const applied = await applyMigrations(db, options.migrations);
    return { applied, versions: await appliedVersions(db, options.schema) };
  } finally {
    await db.close();
  }
}
