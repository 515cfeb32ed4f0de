// Migrations as a step of a deployment: each release's migrations keep the previous release working
// (expand now, contract a release later), so a migration step can run before a rollout while the old
// pods still serve. Here:
// - no migration drops or renames a table or column, or changes a column's type, in one step (a
//   contract step says why it is safe and drops nothing the code still names);
// - this tree's migrations begin with the previous release's, unchanged (test/fixtures, written by
//   scripts/freeze-migrations.ts): a migration that shipped is never edited;
// - a schema upgraded from the previous release's is the schema a new install gets (every engine
//   that can be reopened); the services' store tests also run on upgraded schemas (PGlite in memory,
//   services/platform/test/support/databases.ts);
// - a process in `verify` mode refuses a schema its migrations did not reach and serves on a newer one;
// - `node dist/migrate.js <service>` migrates, and says so.
import { expect } from "chai";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import pg from "pg";
import { openSqlDatabase, SchemaBehindError, type Migration, type SqlDatabase } from "@switchyard/platform/store";
import { EXIT_OK, EXIT_USAGE, runMigrate, SERVICE_MIGRATIONS } from "../scripts/migrate-cli.js";
import {
  forEachDatabase,
  PREVIOUS_RELEASE,
  previousReleaseOf,
  uniqueSchema,
} from "../services/platform/test/support/databases.js";

/** A schema in memory is gone when it closes: what needs it reopened runs on the persistent targets. */
function skipInMemory(test: Mocha.Context): never {
  console.log(
    "      (skipped in memory: the schema must outlive a close and be reopened; the persistent targets run it)",
  );
  test.skip();
}

const ROOT = new URL("..", import.meta.url).pathname;

// ---- additive only ---------------------------------------------------------------------------------

/** What a statement does that the previous release cannot live with, each as "<what> <name>". */
export function oneStepBreaks(sql: string): string[] {
  const text = sql
    .replace(/\$([A-Za-z_]*)\$[\s\S]*?\$\1\$/g, "''") // function bodies
    .replace(/--[^\n]*/g, " ")
    .replace(/\/\*[\s\S]*?\*\//g, " ");
  const breaks: string[] = [];
  for (const raw of text.split(";")) {
    const statement = raw.replace(/\s+/g, " ").trim();
    let m: RegExpExecArray | null;
    if ((m = /^DROP TABLE (?:IF EXISTS )?(.+?)(?: CASCADE| RESTRICT)?$/i.exec(statement))) {
      for (const name of m[1]!.split(",")) breaks.push(`drops table ${name.trim()}`);
    } else if ((m = /^ALTER TABLE (?:IF EXISTS )?(?:ONLY )?(\S+) ([\s\S]*)$/i.exec(statement))) {
      const table = m[1]!;
      // The actions, split at the commas outside parentheses.
      const actions: string[] = [];
      let depth = 0;
      let current = "";
      for (const ch of m[2]!) {
        if (ch === "(") depth++;
        if (ch === ")") depth--;
        if (ch === "," && depth === 0) {
          actions.push(current.trim());
          current = "";
        } else current += ch;
      }
      actions.push(current.trim());
      for (const action of actions) {
        let a: RegExpExecArray | null;
        if (/^DROP CONSTRAINT\b/i.test(action) || /^RENAME CONSTRAINT\b/i.test(action)) continue;
        if ((a = /^DROP (?:COLUMN )?(?:IF EXISTS )?(\w+)/i.exec(action))) breaks.push(`drops column ${table}.${a[1]}`);
        else if ((a = /^RENAME TO (\w+)/i.exec(action))) breaks.push(`renames table ${table}`);
        else if ((a = /^RENAME (?:COLUMN )?(\w+) TO /i.exec(action))) breaks.push(`renames column ${table}.${a[1]}`);
        else if ((a = /^ALTER (?:COLUMN )?(\w+) (?:SET DATA )?TYPE\b/i.exec(action)))
          breaks.push(`changes the type of ${table}.${a[1]}`);
      }
    }
  }
  return breaks;
}

/**
 * What a statement does that the previous release's writers cannot live with during a rolling
 * update: a column they do not write becomes required (added NOT NULL without a default, set NOT
 * NULL, its default dropped). Checked on migrations after the previous release's (earlier ones shipped).
 */
export function writerBreaks(sql: string): string[] {
  const text = sql
    .replace(/\$([A-Za-z_]*)\$[\s\S]*?\$\1\$/g, "''")
    .replace(/--[^\n]*/g, " ")
    .replace(/\/\*[\s\S]*?\*\//g, " ");
  const breaks: string[] = [];
  for (const raw of text.split(";")) {
    const statement = raw.replace(/\s+/g, " ").trim();
    const alter = /^ALTER TABLE (?:IF EXISTS )?(?:ONLY )?(\S+) ([\s\S]*)$/i.exec(statement);
    if (!alter) continue;
    for (const action of alter[2]!.split(/,(?![^(]*\))/).map((a) => a.trim())) {
      let a: RegExpExecArray | null;
      if (
        (a = /^ADD (?:COLUMN )?(?:IF NOT EXISTS )?(\w+) (.*)$/i.exec(action)) &&
        /\bNOT NULL\b/i.test(a[2]!) &&
        !/\bDEFAULT\b/i.test(a[2]!)
      )
        breaks.push(`adds required column ${alter[1]}.${a[1]} without a default`);
      else if ((a = /^ALTER (?:COLUMN )?(\w+) SET NOT NULL\b/i.exec(action)))
        breaks.push(`makes ${alter[1]}.${a[1]} required`);
      else if ((a = /^ALTER (?:COLUMN )?(\w+) DROP DEFAULT\b/i.exec(action)))
        breaks.push(`drops the default of ${alter[1]}.${a[1]}`);
    }
  }
  return breaks;
}

/** The service's code, migrations aside: where a dropped name would still be used. */
function codeOf(service: string): string {
  const dir = join(ROOT, "services", service, "src");
  const files = (d: string): string[] =>
    readdirSync(d, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? files(join(d, e.name)) : [join(d, e.name)],
    );
  return files(dir)
    .filter((f) => f.endsWith(".ts") && !f.endsWith("migrations.ts"))
    .map((f) => readFileSync(f, "utf8"))
    .join("\n");
}

describe("migrations", function () {
  this.timeout(120_000);

  describe("are additive: nothing the previous release uses goes away in one step", () => {
    it("the check finds every one-step drop, rename and type change, and nothing else", () => {
      const refused: [string, string][] = [
        ["DROP TABLE payments;", "drops table payments"],
        ["drop table if exists a, b cascade", "drops table a"],
        ["ALTER TABLE payments DROP COLUMN reference;", "drops column payments.reference"],
        ["ALTER TABLE payments\n  DROP reference", "drops column payments.reference"],
        ["ALTER TABLE payments ADD COLUMN x int, DROP COLUMN IF EXISTS y", "drops column payments.y"],
        ["ALTER TABLE payments RENAME COLUMN reference TO ref", "renames column payments.reference"],
        ["ALTER TABLE payments RENAME reference TO ref", "renames column payments.reference"],
        ["ALTER TABLE payments RENAME TO charges", "renames table payments"],
        ["ALTER TABLE payments ALTER COLUMN amount TYPE numeric", "changes the type of payments.amount"],
        ["ALTER TABLE payments ALTER amount SET DATA TYPE numeric", "changes the type of payments.amount"],
      ];
      for (const [sql, what] of refused) expect(oneStepBreaks(sql), sql).to.include(what);
      const allowed = [
        "ALTER TABLE t ADD COLUMN c text NOT NULL DEFAULT ''",
        "ALTER TABLE t ALTER COLUMN c DROP DEFAULT",
        "ALTER TABLE t ALTER COLUMN c DROP NOT NULL",
        "ALTER TABLE t DROP CONSTRAINT t_pkey",
        "ALTER TABLE t RENAME CONSTRAINT a TO b",
        "CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN DROP TABLE x; END $$",
        "-- DROP TABLE x\nCREATE INDEX i ON t (c)",
        "DROP INDEX i",
      ];
      for (const sql of allowed) expect(oneStepBreaks(sql), sql).to.deep.equal([]);
    });

    it("the check finds every column the previous release's writers would fail on, and nothing else", () => {
      const refused: [string, string][] = [
        ["ALTER TABLE t ADD COLUMN c text NOT NULL", "adds required column t.c without a default"],
        ["ALTER TABLE t ADD c bigint NOT NULL REFERENCES u (id)", "adds required column t.c without a default"],
        ["ALTER TABLE t ALTER COLUMN c SET NOT NULL", "makes t.c required"],
        ["ALTER TABLE t ALTER c DROP DEFAULT", "drops the default of t.c"],
      ];
      for (const [sql, what] of refused) expect(writerBreaks(sql), sql).to.include(what);
      for (const sql of [
        "ALTER TABLE t ADD COLUMN c text NOT NULL DEFAULT ''",
        "ALTER TABLE t ADD COLUMN c text",
        "ALTER TABLE t ALTER COLUMN c DROP NOT NULL",
        "ALTER TABLE t ADD PRIMARY KEY (a, b)",
      ])
        expect(writerBreaks(sql), sql).to.deep.equal([]);
    });

    for (const [service, migrations] of Object.entries(SERVICE_MIGRATIONS)) {
      it(`${service}: no migration after the previous release's makes a column required that its writers do not fill`, () => {
        const shipped = PREVIOUS_RELEASE.services[service]!.length;
        for (const m of migrations.slice(shipped))
          expect(writerBreaks(m.sql), `${service} migration ${m.version} (${m.name})`).to.deep.equal([]);
      });
    }

    for (const [service, migrations] of Object.entries(SERVICE_MIGRATIONS)) {
      it(`${service}: every migration keeps the previous release working, or is a contract step of what the code no longer uses`, () => {
        const code = codeOf(service);
        for (const m of migrations) {
          const breaks = oneStepBreaks(m.sql);
          if (!m.contract) {
            expect(
              breaks,
              `${service} migration ${m.version} (${m.name}) drops or renames in one step: add instead, and drop a release later (a contract step)`,
            ).to.deep.equal([]);
            continue;
          }
          expect(m.contract, "a contract step says which release stopped using what it drops")
            .to.be.a("string")
            .and.not.equal("");
          for (const b of breaks) {
            const name = b.split(" ").pop()!.split(".").pop()!;
            expect(
              new RegExp(`\\b${name}\\b`).test(code),
              `${service} migration ${m.version}: ${b}, which the code still names`,
            ).to.equal(false);
          }
        }
      });
    }
  });

  describe("continue the previous release's, unchanged", () => {
    it(`the fixture is the previous release's (${PREVIOUS_RELEASE.commit.slice(0, 12)}), for every service`, () => {
      expect(Object.keys(PREVIOUS_RELEASE.services).sort()).to.deep.equal(Object.keys(SERVICE_MIGRATIONS).sort());
    });
    for (const [service, migrations] of Object.entries(SERVICE_MIGRATIONS)) {
      it(`${service}: its first migrations are the previous release's, as they shipped`, () => {
        const previous = PREVIOUS_RELEASE.services[service]!;
        expect(migrations.length).to.be.at.least(previous.length);
        previous.forEach((m, i) =>
          expect(
            { version: migrations[i]!.version, name: migrations[i]!.name, sql: migrations[i]!.sql },
            `${service} migration ${m.version} shipped: never edit it, add the next`,
          ).to.deep.equal({ version: m.version, name: m.name, sql: m.sql }),
        );
        // A service new in this release has nothing to upgrade from: its store tests start fresh.
        expect(previousReleaseOf(migrations), "the store tests' upgraded target finds it").to.equal(
          previous.length > 0 ? previous : undefined,
        );
      });
    }
  });

  /** The schema as the catalog has it, with the schema's own name taken out. */
  async function catalogOf(db: SqlDatabase, schema: string): Promise<string[]> {
    const strip = (s: string) => s.split(`${schema}.`).join("<schema>.");
    const rows = [
      ...(
        await db.query<{ d: string }>(
          `SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') AS d FROM information_schema.columns WHERE table_schema = $1`,
          [schema],
        )
      ).rows,
      ...(
        await db.query<{ d: string }>(
          `SELECT 'index ' || indexname || ' ' || indexdef AS d FROM pg_indexes WHERE schemaname = $1`,
          [schema],
        )
      ).rows,
      ...(
        await db.query<{ d: string }>(
          `SELECT 'constraint ' || c.conrelid::regclass::text || ' ' || c.conname || ' ' || pg_get_constraintdef(c.oid) AS d FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = $1`,
          [schema],
        )
      ).rows,
      ...(
        await db.query<{ d: string }>(
          `SELECT 'trigger ' || t.tgname || ' ' || pg_get_triggerdef(t.oid) AS d FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND NOT t.tgisinternal`,
          [schema],
        )
      ).rows,
    ];
    return rows.map((r) => strip(r.d).replace(/\b[a-z_]*t_[0-9a-f]{12}\b/g, "<schema>")).sort();
  }

  forEachDatabase("upgraded from the previous release", (dbs) => {
    for (const [service, migrations] of Object.entries(SERVICE_MIGRATIONS)) {
      it(`${service}: the previous release's schema, migrated, is the one a new install gets`, async function () {
        // Reopened below; the in-memory target upgrades every store suite's schema instead.
        if (!dbs.target.persistent) skipInMemory(this);
        const upgraded = dbs.place();
        await (await upgraded.open(PREVIOUS_RELEASE.services[service]!)).close();
        const after = await upgraded.open(migrations);
        const fresh = dbs.place();
        const installed = await fresh.open(migrations);
        const catalog = await catalogOf(installed, fresh.schema);
        expect(catalog.length, "tables, columns, indexes, constraints").to.be.greaterThan(10);
        expect(await catalogOf(after, upgraded.schema)).to.deep.equal(catalog);
      });
    }

    it("a process in verify mode refuses a schema its migrations did not reach, and names what is missing", async function () {
      if (!dbs.target.persistent) skipInMemory(this);
      const previous = PREVIOUS_RELEASE.services.payments!;
      const place = dbs.place();
      await (await place.open(previous)).close();
      const behind = SERVICE_MIGRATIONS.payments!.filter((m) => !previous.some((p) => p.version === m.version));
      expect(behind, "this release adds to payments' schema").to.not.have.lengthOf(0);
      const refusal = await place.open(SERVICE_MIGRATIONS.payments!, { schemaAtStart: "verify" }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(refusal).to.be.instanceOf(SchemaBehindError);
      expect((refusal as SchemaBehindError).missing.map((m) => m.version)).to.deep.equal(behind.map((m) => m.version));
      expect((refusal as Error).message).to.include("node dist/migrate.js");
      // Never migrated at all: refused too.
      expect(
        await dbs
          .place()
          .open(SERVICE_MIGRATIONS.payments!, { schemaAtStart: "verify" })
          .then(
            () => undefined,
            (e: unknown) => e,
          ),
      ).to.be.instanceOf(SchemaBehindError);
    });

    it("a process in verify mode serves on its own schema, and on a newer release's (the previous release during a rollout)", async function () {
      if (!dbs.target.persistent) skipInMemory(this);
      const current = SERVICE_MIGRATIONS.payments!;
      const next: Migration = {
        version: Math.max(...current.map((m) => m.version)) + 1,
        name: "the next release's column",
        sql: "ALTER TABLE payments ADD COLUMN next_release_note text NOT NULL DEFAULT ''",
      };
      const place = dbs.place();
      await (await place.open([...current, next])).close();
      const db = await place.open(current, { schemaAtStart: "verify" });
      {
        // The older code's writes and reads work on the expanded table.
        await db.query(
          `INSERT INTO payments (id, tenant_id, amount, currency, source, owner_user_id, reference) VALUES ('pay_1', 'acme', 100, 'EUR', 'tok', 1, 'r')`,
        );
        expect((await db.query<{ n: bigint }>("SELECT count(*) AS n FROM payments")).rows[0]!.n).to.equal(1n);
      }
    });
  });

  describe("node dist/migrate.js", () => {
    const io = () => {
      let out = "";
      let err = "";
      const sink = (append: (s: string) => void) =>
        new Writable({ write: (chunk, _e, done) => (append(String(chunk)), done()) });
      return {
        io: { stdout: sink((s) => (out += s)), stderr: sink((s) => (err += s)) },
        out: () => out,
        err: () => err,
      };
    };

    it("refuses a wrong command line or environment without touching anything (exit 2)", async () => {
      for (const [argv, env] of [
        [[], { DATABASE_URL: "postgres://x@127.0.0.1/db" }],
        [["nope"], { DATABASE_URL: "postgres://x@127.0.0.1/db" }],
        [["payments", "orders"], { DATABASE_URL: "postgres://x@127.0.0.1/db" }],
        [["payments"], {}],
      ] as const) {
        const run = io();
        expect(await runMigrate([...argv], { ...env }, run.io), argv.join(" ")).to.equal(EXIT_USAGE);
        expect(run.err()).to.match(/^migrate: /);
      }
    });

    it("migrates a service's schema on the PostgreSQL server, and a second run has nothing to do", async function () {
      const url = process.env.DATABASE_URL;
      if (!url) {
        console.log("      (skipped: DATABASE_URL unset, no PostgreSQL server to migrate)");
        this.skip();
      }
      const schema = uniqueSchema();
      try {
        const first = io();
        expect(
          await runMigrate(["orders"], { DATABASE_URL: url, ORDERS_DB_SCHEMA: schema }, first.io),
          first.err(),
        ).to.equal(EXIT_OK);
        const top = Math.max(...SERVICE_MIGRATIONS.orders!.map((m) => m.version));
        expect(first.out()).to.include(`migrated to version ${top}`);
        const second = io();
        expect(await runMigrate(["orders"], { DATABASE_URL: url, ORDERS_DB_SCHEMA: schema }, second.io)).to.equal(
          EXIT_OK,
        );
        expect(second.out()).to.include(`is at version ${top}: nothing to apply`);
        // And a service started with DATABASE_MIGRATIONS=verify accepts it.
        const db = await openSqlDatabase({
          databaseUrl: url,
          schema,
          migrations: SERVICE_MIGRATIONS.orders!,
          schemaAtStart: "verify",
        });
        await db.close();
      } finally {
        const client = new pg.Client(url);
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        await client.end();
      }
    });
  });
});
