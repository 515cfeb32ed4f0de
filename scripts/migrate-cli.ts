// The migration step of a deployment (`node dist/migrate.js <service>`, `npm run migrate -- <service>`):
// applies a service's migrations to its schema on the PostgreSQL server, then exits. deploy/ runs it as
// each service pod's init container, before the service starts with DATABASE_MIGRATIONS=verify: a long
// migration has no startup probe's clock on it, and a pod of the new release never serves a schema
// its migrations did not reach. Migrations are additive (expand now, contract a release later:
// test/migrations.test.ts), so pods of the previous release keep serving meanwhile.
import type { Writable } from "node:stream";
import { ConfigError, loadConfig, parse, setting } from "@switchyard/platform/config.js";
import { migrateSchema, type Migration } from "@switchyard/platform/store";
import { waitForDatabase } from "@switchyard/platform/database-readiness.js";
import { identityMigrations } from "@switchyard/identity/store/migrations.js";
import { paymentsMigrations } from "@switchyard/payments/store/migrations.js";
import { ordersMigrations } from "@switchyard/orders/store/migrations.js";
import { contentMigrations } from "@switchyard/content/store/migrations.js";
import { webhooksMigrations } from "@switchyard/webhooks/store/migrations.js";

export const EXIT_OK = 0;
/** The migration failed: one line on stderr says why; nothing of the failed migration was kept. */
export const EXIT_FAILED = 1;
/** The command line or the environment is wrong: nothing was attempted. */
export const EXIT_USAGE = 2;

/** Each service's migrations, in the order they are applied. */
export const SERVICE_MIGRATIONS: Readonly<Record<string, readonly Migration[]>> = {
  identity: identityMigrations,
  payments: paymentsMigrations,
  orders: ordersMigrations,
  content: contentMigrations,
  webhooks: webhooksMigrations,
};

export const USAGE = `Usage: node dist/migrate.js <service>        (${Object.keys(SERVICE_MIGRATIONS).join(", ")})

Applies the service's migrations to its schema on the PostgreSQL server at DATABASE_URL (as the
service's own role), in one transaction under the same advisory lock the services take, and exits.

Environment:
  DATABASE_URL            required: the service's PostgreSQL URL (the same as the service's)
  <SERVICE>_DB_SCHEMA     its schema (default: the service's name), e.g. PAYMENTS_DB_SCHEMA

Exit status: 0 migrated (or nothing to do); 1 failed, one line on stderr; 2 usage error.
`;

/** The settings the command reads for a service (its schema setting is the service's own name). */
export function migrateSettings(service: string) {
  return {
    databaseUrl: setting("DATABASE_URL", parse.url("postgres:", "postgresql:"), "the service's PostgreSQL URL"),
    schema: setting(`${service.toUpperCase()}_DB_SCHEMA`, parse.identifier, "the service's schema", service),
  };
}

export async function runMigrate(
  argv: string[],
  env: NodeJS.ProcessEnv,
  io: { stdout: Writable; stderr: Writable },
): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    io.stdout.write(USAGE);
    return EXIT_OK;
  }
  const [service, ...rest] = argv;
  const migrations = service === undefined ? undefined : SERVICE_MIGRATIONS[service];
  if (!migrations || rest.length > 0) {
    io.stderr.write(
      `migrate: ${service === undefined ? "a service is required" : migrations ? "one service at a time" : `unknown service "${service}"`}\n${USAGE.split("\n")[0]}\n`,
    );
    return EXIT_USAGE;
  }
  let config;
  try {
    config = loadConfig(migrateSettings(service!), env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    io.stderr.write(`migrate: ${err.problems.join("; ")}\n`);
    return EXIT_USAGE;
  }
  try {
    // A server that cannot be reached yet (restarting, not up) is waited for, as the services do:
    // an init container that exits goes into a back-off that outlasts the server's return.
    const say = (fields: object, message: string) =>
      io.stderr.write(`migrate: ${service}: ${message} ${JSON.stringify(fields)}\n`);
    const { applied, versions } = await waitForDatabase(
      () => migrateSchema({ databaseUrl: config.databaseUrl, schema: config.schema, migrations }),
      { info: say, warn: say },
    );
    const version = versions.length > 0 ? Math.max(...versions) : 0;
    io.stdout.write(
      applied.length > 0
        ? `${service}: schema ${config.schema} migrated to version ${version} (applied ${applied.map((m) => `${m.version} ${m.name}`).join("; ")})\n`
        : `${service}: schema ${config.schema} is at version ${version}: nothing to apply\n`,
    );
    return EXIT_OK;
  } catch (err) {
    io.stderr.write(`migrate: ${service}: ${(err as Error).message.replace(/\s+/g, " ")}\n`);
    return EXIT_FAILED;
  }
}
