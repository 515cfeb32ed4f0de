// `@switchyard/platform/store`: the database engines (embedded PGlite, the PostgreSQL server through
// pg) behind one SqlDatabase, migrations, and idempotency keys kept with the work they guard. Only
// the services' stores and assembly import it; the gateway never does.
export type { Migration, SchemaAtStart, SqlDatabase, SqlExecutor, SqlResult } from "./engine.js";
export { openSqlDatabase, type OpenSqlOptions } from "./open-database.js";
export { applyMigrations, appliedVersions, migrateSchema, SchemaBehindError } from "./migrator.js";
export { DEFAULT_POOL_MAX } from "./postgres-database.js";
export { PGLITE_SETTINGS } from "./pglite-database.js";
export * from "./idempotency.js";
export { KeysetPageQuery, type KeysetOrder, type KeysetPage, type KeysetPageSpec } from "./keyset-page.js";
export * from "./outbox.js";
export * from "./leases.js";
