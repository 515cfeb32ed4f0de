// The embedded store's start: a new data directory is a copy of the initialised cluster shipped for
// the installed PGlite (no initdb), an interrupted copy is made again, and the engine runs with the
// store's memory settings. Fails after a PGlite upgrade until `npm run pglite-cluster` is run.
import { expect } from "chai";
import { existsSync, mkdtempSync, readdirSync, rmSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openSqlDatabase, type SqlDatabase } from "@switchyard/platform/store";
import { clusterArchive, pgliteVersion, seedDataDir } from "@switchyard/platform/store/pglite-cluster.js";

describe("embedded store: the shipped PGlite cluster", function () {
  this.timeout(60_000);
  const root = mkdtempSync(join(tmpdir(), "switchyard-cluster-test-"));
  const opened: SqlDatabase[] = [];
  after(async () => {
    for (const db of opened) await db.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("is there for the installed PGlite", () => {
    expect(clusterArchive(), `no cluster archive for PGlite ${pgliteVersion()}: run npm run pglite-cluster`).to.be.a(
      "string",
    );
  });

  it("makes a new data directory a cluster before PGlite starts, and again after an interrupted copy", () => {
    const dir = join(root, "seeded");
    seedDataDir(dir);
    expect(readdirSync(dir)).to.include.members(["PG_VERSION", "base", "global", "pg_wal", "postgresql.conf"]);
    unlinkSync(join(dir, "PG_VERSION")); // as if the copy had stopped before its last file
    seedDataDir(dir);
    expect(existsSync(join(dir, "PG_VERSION"))).to.equal(true);
  });

  for (const [where, dataDir] of [
    ["a new data directory", () => join(root, "fresh")],
    ["memory", () => undefined],
  ] as const) {
    it(`opens, migrates and keeps data in ${where}, with the store's memory settings`, async () => {
      const db = await openSqlDatabase({
        dataDir: dataDir(),
        schema: "cluster_test",
        migrations: [{ version: 1, name: "t", sql: "CREATE TABLE t (id int PRIMARY KEY)" }],
      });
      opened.push(db);
      await db.query("INSERT INTO t VALUES (1)");
      expect((await db.query<{ id: number }>("SELECT id FROM t")).rows).to.deep.equal([{ id: 1 }]);
      expect((await db.query<{ shared_buffers: string }>("SHOW shared_buffers")).rows[0]?.shared_buffers).to.equal(
        "16MB",
      );
    });
  }
});
