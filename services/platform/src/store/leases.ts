// Named leases in a service's schema: at most one holder at a time, until it lets go or its time runs
// out (a holder killed without letting go loses it then). Whatever runs on one replica at a time — the
// orders reconciler, the outbox relay — takes one by name.
import type { SqlExecutor } from "./engine.js";

/** Include in a service's migrations to use `takeLease`. */
export const LEASES_TABLE_SQL = `
CREATE TABLE leases (
  name       text PRIMARY KEY,
  holder     text NOT NULL,
  expires_at timestamptz NOT NULL
);`;

/**
 * Takes the lease `name` for `ttlMs` from now, or renews it, when nobody else holds it unexpired;
 * true when `holder` holds it now. The database's clock decides, not the replicas'.
 */
export async function takeLease(db: SqlExecutor, name: string, holder: string, ttlMs: number): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, clock_timestamp() + $3::bigint * interval '1 millisecond')
     ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
     WHERE leases.holder = EXCLUDED.holder OR leases.expires_at < clock_timestamp()`,
    [name, holder, ttlMs],
  );
  return rowCount === 1;
}

/** Lets the lease go at once (a stopping holder), if `holder` has it. */
export async function releaseLease(db: SqlExecutor, name: string, holder: string): Promise<void> {
  await db.query(`DELETE FROM leases WHERE name = $1 AND holder = $2`, [name, holder]);
}
