// `@switchyard/platform/store`: the database engines (embedded PGlite, the PostgreSQL server through
// pg) behind one SqlDatabase, migrations, and idempotency keys kept with the work they guard. Only
// the services' stores and assembly import it; the gateway never does.
export * from "./sql.js";
export * from "./idempotency.js";
