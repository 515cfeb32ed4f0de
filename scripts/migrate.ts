// Entrypoint of the migration step (`node dist/migrate.js <service>`; see migrate-cli.ts): the only
// place that reads the process's arguments and environment.
import { EXIT_FAILED, runMigrate } from "./migrate-cli.js";

runMigrate(process.argv.slice(2), process.env, { stdout: process.stdout, stderr: process.stderr }).then(
  (status) => process.exit(status),
  (err: unknown) => {
    process.stderr.write(`migrate: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(EXIT_FAILED);
  },
);
