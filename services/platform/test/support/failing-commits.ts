// A database whose transactions fail at the last moment, after all their work, when `fails()` says
// so: what a COMMIT that never happens (an error, a lost connection, a process killed) leaves behind.
import type { SqlDatabase } from "@switchyard/platform/store";

export class CommitFailed extends Error {
  constructor() {
    super("the commit failed (test)");
  }
}

export function failingCommits(db: SqlDatabase, fails: () => boolean = () => true): SqlDatabase {
  return {
    engine: db.engine,
    schema: db.schema,
    query: (sql, params) => db.query(sql, params),
    exec: (sql) => db.exec(sql),
    listen: (channel, handler, onResync) => db.listen(channel, handler, onResync),
    close: () => db.close(),
    transaction: (work) =>
      db.transaction(async (tx) => {
        const result = await work(tx);
        if (fails()) throw new CommitFailed();
        return result;
      }),
  };
}
