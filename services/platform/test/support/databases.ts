// The store adapters every contract suite runs against: PGlite in memory, PGlite persisted under
// os.tmpdir(), and the PostgreSQL server at DATABASE_URL when it is set. On PGlite in memory a
// service's schema is not made fresh but upgraded: the previous release's migrations first
// (test/fixtures/previous-release-migrations.json), then the ones given — so each service's store
// tests also run on a schema that came through the upgrade a deployment makes (a set but unreachable
// server fails the suite; an unset one is announced once on stdout). Usage:
//
//   forEachDatabase("payments store", (dbs) => {       // describe(title), one nested per target
//     let db: SqlDatabase;
//     before(async () => { db = await dbs.open(MIGRATIONS); });   // a new, empty database
//     it("…", async () => {
//       const place = dbs.place();                     // a new, empty place: its own schema t_<hex>
//       await (await place.open(MIGRATIONS)).close();
//       const again = await place.open(MIGRATIONS);    // the same data when dbs.target.persistent
//     });
//   });
//
// Databases opened in a test (or beforeEach) are closed after it, those opened in `before` after the
// suite, which then drops its schemas on the server (DROP SCHEMA … CASCADE) and removes its files.
// Hooks and tests under a target get a timeout of at least 60 s.
import { randomBytes } from "node:crypto";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { readFileSync } from "node:fs";
import {
  applyMigrations,
  openSqlDatabase,
  type Migration,
  type SchemaAtStart,
  type SqlDatabase,
} from "@switchyard/platform/store";

/** The previous release's migrations per service (scripts/freeze-migrations.ts wrote them). */
export const PREVIOUS_RELEASE = JSON.parse(
  readFileSync(new URL("../../../../test/fixtures/previous-release-migrations.json", import.meta.url), "utf8"),
) as { commit: string; services: Record<string, Migration[]> };

/** The previous release's migrations of the service whose list `migrations` continues, if any. */
export function previousReleaseOf(migrations: readonly Migration[]): Migration[] | undefined {
  const same = (a: Migration, b: Migration | undefined) =>
    b !== undefined && a.version === b.version && a.name === b.name && a.sql === b.sql;
  return Object.values(PREVIOUS_RELEASE.services).find(
    (previous) => previous.length > 0 && previous.every((m, i) => same(m, migrations[i])),
  );
}

export interface DatabaseTarget {
  /** Shown as the nested describe's title. */
  readonly name: string;
  readonly engine: SqlDatabase["engine"];
  /** Opening the same place again finds what was written before (false for PGlite in memory). */
  readonly persistent: boolean;
  /** One place can be open several times at once (a server: replicas; never a PGlite directory). */
  readonly sharedOpens: boolean;
}

export interface DatabasePlace {
  /** The schema every open of this place uses. */
  readonly schema: string;
  /** Opens the place with these migrations (applied at open, like a service start; or only verified). */
  open(migrations: readonly Migration[], options?: OpenOptions): Promise<SqlDatabase>;
}

export interface TestDatabases {
  readonly target: DatabaseTarget;
  /** A new, empty place: its own schema, and for PGlite on disk its own data directory. */
  place(): DatabasePlace;
  /** Shorthand for `place().open(migrations)`. */
  open(migrations: readonly Migration[], options?: OpenOptions): Promise<SqlDatabase>;
}

export interface OpenOptions {
  maxConnections?: number;
  /** As DATABASE_MIGRATIONS: apply (default) or only verify the migrations. */
  schemaAtStart?: SchemaAtStart;
}

const SKIPPED_NOTICE = "  (PostgreSQL server suites skipped: DATABASE_URL is not set)";
let skipAnnounced = false;

export const uniqueSchema = (): string => `t_${randomBytes(6).toString("hex")}`;

// A fresh PGlite data directory costs a full initdb (seconds); a copy of one made once per process
// costs a restart. The template is itself made by openSqlDatabase on a directory that does not
// exist yet, so that path stays covered.
let templateDir: Promise<string> | undefined;
const placesSeeded = new Set<string>();
let scratchRoot: string | undefined;

function scratch(): string {
  if (!scratchRoot) {
    const root = mkdtempSync(join(tmpdir(), "switchyard-sql-test-"));
    scratchRoot = root;
    process.on("exit", () => rmSync(root, { recursive: true, force: true }));
  }
  return scratchRoot;
}

export function pgliteTemplate(): Promise<string> {
  templateDir ??= (async () => {
    const dir = join(scratch(), "template", "pgdata");
    const db = await openSqlDatabase({ dataDir: dir, schema: "switchyard_template", migrations: [] });
    await db.close();
    return dir;
  })();
  return templateDir;
}

interface Backend {
  readonly target: DatabaseTarget;
  /** Runs first in the target's describe. */
  prepare(): Promise<void>;
  /** Opens the place named by `schema`. */
  open(schema: string, migrations: readonly Migration[], options: OpenOptions): Promise<SqlDatabase>;
  /** Runs last: removes what the places left behind. */
  cleanUp(schemas: readonly string[]): Promise<void>;
}

function backends(): Backend[] {
  const list: Backend[] = [
    {
      target: {
        name: "PGlite (in memory; a service's schema upgraded from the previous release's)",
        engine: "pglite",
        persistent: false,
        sharedOpens: false,
      },
      prepare: async () => {},
      open: async (schema, migrations, { schemaAtStart }) => {
        const previous = previousReleaseOf(migrations);
        if (!previous || schemaAtStart === "verify") return openSqlDatabase({ schema, migrations, schemaAtStart });
        const db = await openSqlDatabase({ schema, migrations: previous });
        await applyMigrations(db, migrations);
        return db;
      },
      cleanUp: async () => {},
    },
    {
      target: {
        name: `PGlite (data directory under ${tmpdir()})`,
        engine: "pglite",
        persistent: true,
        sharedOpens: false,
      },
      prepare: async () => {
        await pgliteTemplate();
      },
      open: async (schema, migrations, { schemaAtStart }) => {
        const dataDir = join(scratch(), schema);
        // A place's first open starts from the template: an initialised cluster, not yet migrated.
        if (!placesSeeded.has(schema)) {
          cpSync(await pgliteTemplate(), dataDir, { recursive: true });
          placesSeeded.add(schema);
        }
        return openSqlDatabase({ dataDir, schema, migrations, schemaAtStart });
      },
      cleanUp: async (schemas) => {
        for (const schema of schemas)
          if (placesSeeded.has(schema)) rmSync(join(scratch(), schema), { recursive: true, force: true });
      },
    },
  ];
  const url = process.env.DATABASE_URL;
  if (url) {
    list.push({
      target: { name: "PostgreSQL server (DATABASE_URL)", engine: "postgres", persistent: true, sharedOpens: true },
      prepare: async () => {
        const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
        try {
          await client.connect();
          await client.query("SELECT 1");
        } catch (err) {
          throw new Error(`DATABASE_URL is set but the PostgreSQL server cannot be reached: ${(err as Error).message}`);
        } finally {
          await client.end().catch(() => {});
        }
      },
      open: (schema, migrations, { maxConnections, schemaAtStart }) =>
        openSqlDatabase({
          databaseUrl: url,
          schema,
          migrations,
          schemaAtStart,
          ...(maxConnections === undefined ? {} : { maxConnections }),
        }),
      cleanUp: async (schemas) => {
        if (schemas.length === 0) return;
        const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
        await client.connect();
        try {
          for (const schema of schemas) await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        } finally {
          await client.end();
        }
      },
    });
  }
  return list;
}

/** Declares `describe(title)` running `body` once per store adapter (see the comment at the top). */
/**
 * Gives each named service of a data directory (DATA_DIR/<name>) an initialised, empty PGlite cluster
 * copied from the template, as a restart would find it: the service skips initdb and only migrates.
 * (The first start on an empty directory is what \`npm start\` and its README test go through.)
 */
export async function seedPgliteDataDirs(dataDir: string, names: readonly string[]): Promise<void> {
  const template = await pgliteTemplate();
  for (const name of names) cpSync(template, join(dataDir, name), { recursive: true });
}

export function forEachDatabase(title: string, body: (dbs: TestDatabases) => void): void {
  describe(title, () => {
    if (!process.env.DATABASE_URL) {
      before(() => {
        if (skipAnnounced) return;
        skipAnnounced = true;
        console.log(SKIPPED_NOTICE);
      });
    }
    for (const backend of backends()) {
      describe(backend.target.name, function () {
        // A PGlite start costs seconds of CPU, more on a busy machine.
        this.timeout(Math.max(this.timeout(), 60_000));
        const schemas: string[] = [];
        const suiteScoped: SqlDatabase[] = [];
        const testScoped: SqlDatabase[] = [];
        let inTest = false;

        const place = (): DatabasePlace => {
          const schema = uniqueSchema();
          schemas.push(schema);
          return {
            schema,
            open: async (migrations, options) => {
              const db = await backend.open(schema, migrations, options ?? {});
              (inTest ? testScoped : suiteScoped).push(db);
              return db;
            },
          };
        };

        before(() => backend.prepare());
        beforeEach(() => {
          inTest = true;
        });

        body({ target: backend.target, place, open: (migrations, options) => place().open(migrations, options) });

        // Registered after body's hooks, so they run after them.
        afterEach(async () => {
          inTest = false;
          await Promise.all(testScoped.splice(0).map((db) => db.close()));
        });
        after(async () => {
          await Promise.all([...testScoped.splice(0), ...suiteScoped.splice(0)].map((db) => db.close()));
          await backend.cleanUp(schemas.splice(0));
        });
      });
    }
  });
}
