// Named prepared statements on the PostgreSQL server: a statement with parameters is parsed and
// planned once per connection, not on every run; statements without parameters (scripts, SET, DDL)
// stay unnamed; the names are bounded however much SQL is built at run time; and no store reads
// `*`, whose result a newer release's added column would change under a prepared statement.
import { expect } from "chai";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { SqlExecutor } from "@switchyard/platform/store";
import { MAX_NAMED_STATEMENTS } from "@switchyard/platform/store/postgres-database.js";
import { serverSchemaSuite } from "./support/server-schema.js";

const SERVICES = new URL("../../", import.meta.url).pathname;

/** Every TypeScript source file of the services (and the platform), by path. */
function serviceSources(): string[] {
  return readdirSync(SERVICES, { recursive: true, encoding: "utf8" })
    .filter((path) => /^[^/]+\/src\/.*\.ts$/.test(path))
    .map((path) => join(SERVICES, path));
}

describe("statements the stores prepare", () => {
  it("name every column they read: a `*` would break a prepared statement when a migration adds a column", () => {
    const starred = serviceSources().filter((path) =>
      /\b(SELECT|RETURNING)\s+(\w+\.)?\*/i.test(readFileSync(path, "utf8")),
    );
    expect(starred).to.deep.equal([]);
  });
});

/** The statements prepared on the connection that runs `tx` (pg_prepared_statements is per session). */
async function preparedOn(tx: SqlExecutor): Promise<string[]> {
  // Without parameters, so never one of the prepared statements it lists.
  const { rows } = await tx.query<{ statement: string }>("SELECT statement FROM pg_prepared_statements");
  return rows.map((r) => r.statement);
}

describe("named prepared statements (PostgreSQL server)", function () {
  this.timeout(30_000);
  const { open: openRows } = serverSchemaSuite("named statements");
  const open = () => openRows({ maxConnections: 1 });

  it("prepares a statement with parameters once per connection, and runs it again by name", async () => {
    const db = await open();
    const read = "SELECT n FROM rows WHERE id = $1";
    await db.query("INSERT INTO rows (id, n) VALUES ($1, $2)", [1, 10]);
    for (let i = 0; i < 3; i++) expect((await db.query<{ n: number }>(read, [1])).rows).to.deep.equal([{ n: 10 }]);
    await db.transaction(async (tx) => {
      expect((await tx.query<{ n: number }>(read, [1])).rows, "in a transaction too").to.deep.equal([{ n: 10 }]);
      const prepared = await preparedOn(tx);
      expect(
        prepared.filter((s) => s === read),
        "one prepared statement for every run of it",
      ).to.have.length(1);
      expect(prepared).to.include("INSERT INTO rows (id, n) VALUES ($1, $2)");
    });
  });

  it("leaves statements without parameters unnamed: SET, DDL and scripts are parsed as sent", async () => {
    const db = await open();
    await db.query("SELECT 1 AS one");
    await db.exec("SELECT 2; SELECT 3");
    await db.transaction(async (tx) => {
      await tx.query("SET LOCAL statement_timeout = 1000");
      const prepared = await preparedOn(tx);
      expect(prepared.filter((s) => !s.includes("$"))).to.deep.equal([]);
    });
  });

  it(`names at most ${MAX_NAMED_STATEMENTS} statement texts; SQL built at run time beyond them runs unnamed, and right`, async () => {
    const db = await open();
    const distinct = MAX_NAMED_STATEMENTS + 20;
    await db.transaction(async (tx) => {
      for (let i = 0; i < distinct; i++)
        expect((await tx.query<{ n: number }>(`SELECT $1::int + ${i} AS n`, [1])).rows[0]!.n).to.equal(1 + i);
      expect((await preparedOn(tx)).length).to.equal(MAX_NAMED_STATEMENTS);
    });
    // The named ones serve on, by name, on the same connection.
    expect((await db.query<{ n: number }>("SELECT $1::int + 0 AS n", [5])).rows[0]!.n).to.equal(5);
  });
});
