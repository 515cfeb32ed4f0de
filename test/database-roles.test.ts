// One database role per service (deploy/postgres/roles.sql, run with psql as an operator would, on
// the PostgreSQL server): each service migrates and works in its own schema under its own role, and
// no role reaches another's — content's role cannot read identity's users, nor create anything in
// the public schema.
import { expect } from "chai";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import pg from "pg";
import { openSqlDatabase, type SqlDatabase } from "@switchyard/platform/store";
import { identityMigrations } from "@switchyard/identity/store/migrations.js";
import { contentMigrations } from "@switchyard/content/store/migrations.js";

const run = promisify(execFile);
const SCRIPT = fileURLToPath(new URL("../deploy/postgres/roles.sql", import.meta.url));
const SERVICES = ["identity", "payments", "orders", "content", "webhooks"] as const;

describe("database roles (deploy/postgres/roles.sql, PostgreSQL server)", function () {
  this.timeout(60_000);
  const url = process.env.DATABASE_URL;
  const prefix = `t_${randomBytes(4).toString("hex")}`;
  const name = (service: string) => `${prefix}_${service}`;
  const opened: SqlDatabase[] = [];

  const as = (service: string) => {
    const u = new URL(url!);
    u.username = name(service);
    u.password = "role-test-password";
    return u.toString();
  };

  before(async function () {
    if (!url) {
      console.log("  (database roles skipped: DATABASE_URL is not set)");
      return this.skip();
    }
    const psql = await run("psql", ["--version"]).then(
      () => true,
      () => false,
    );
    if (!psql) {
      console.log("  (database roles skipped: psql, which the script is written for, is not installed)");
      return this.skip();
    }
    const vars = SERVICES.flatMap((s) => [
      "-v",
      `${s}_role=${name(s)}`,
      "-v",
      `${s}_schema=${name(s)}`,
      "-v",
      `${s}_password=role-test-password`,
    ]);
    // Run twice: an operator runs it again when a password changes.
    for (let i = 0; i < 2; i++) await run("psql", [url, "-v", "ON_ERROR_STOP=1", "-q", ...vars, "-f", SCRIPT]);
  });

  after(async () => {
    for (const db of opened) await db.close();
    if (!url) return;
    const admin = new pg.Client(url);
    await admin.connect();
    for (const s of SERVICES)
      await admin
        .query(`DROP SCHEMA IF EXISTS ${name(s)} CASCADE; DROP OWNED BY ${name(s)}; DROP ROLE IF EXISTS ${name(s)}`)
        .catch(() => {});
    await admin.end();
  });

  const open = async (service: "identity" | "content") => {
    const db = await openSqlDatabase({
      databaseUrl: as(service),
      schema: name(service),
      migrations: service === "identity" ? identityMigrations : contentMigrations,
    });
    opened.push(db);
    return db;
  };

  it("lets each service migrate and work in its own schema under its own role", async () => {
    const identity = await open("identity");
    await identity.query("INSERT INTO tenants (id, display_name) VALUES ('acme', 'Acme') ON CONFLICT DO NOTHING");
    expect((await identity.query<{ n: bigint }>("SELECT count(*) AS n FROM tenants")).rows[0]!.n).to.equal(1n);
    const content = await open("content");
    expect((await content.query<{ n: bigint }>("SELECT count(*) AS n FROM documents")).rows[0]!.n).to.equal(0n);
  });

  it("keeps content's role out of identity's schema and out of the public schema", async () => {
    const client = new pg.Client(as("content"));
    await client.connect();
    try {
      const refused = async (sql: string) =>
        client.query(sql).then(
          () => "allowed",
          (e: { code?: string }) => e.code,
        );
      expect(await refused(`SELECT * FROM ${name("identity")}.users`), "reading identity's users").to.equal("42501");
      expect(await refused(`SELECT * FROM ${name("identity")}.signing_keys`), "reading identity's keys").to.equal(
        "42501",
      );
      expect(
        await refused(`CREATE TABLE ${name("identity")}.planted (x int)`),
        "writing into identity's schema",
      ).to.equal("42501");
      expect(await refused(`CREATE TABLE public.${prefix}_planted (x int)`), "the public schema").to.equal("42501");
      expect(await refused(`SELECT count(*) FROM ${name("content")}.documents`), "its own schema").to.equal("allowed");
    } finally {
      await client.end();
    }
  });

  it("gives no role more than a login: no superuser, no role or database creation", async () => {
    const admin = new pg.Client(url);
    await admin.connect();
    try {
      const { rows } = await admin.query<{
        rolname: string;
        rolsuper: boolean;
        rolcreaterole: boolean;
        rolcreatedb: boolean;
        rolcanlogin: boolean;
      }>(
        "SELECT rolname, rolsuper, rolcreaterole, rolcreatedb, rolcanlogin FROM pg_roles WHERE rolname LIKE $1 ORDER BY rolname",
        [`${prefix}_%`],
      );
      expect(rows.map((r) => r.rolname)).to.deep.equal(SERVICES.map(name).sort());
      for (const r of rows)
        expect([r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolcanlogin], r.rolname).to.deep.equal([
          false,
          false,
          false,
          true,
        ]);
    } finally {
      await admin.end();
    }
  });
});
