// Entrypoint of the operator's command line (`npm run admin -- …`; see admin-cli.ts and
// docs/operations.md, "Creating a tenant on a deployed mesh"): the only place that reads the process's arguments and environment.
import { EXIT_FAILED, runAdmin } from "./admin-cli.js";

runAdmin(process.argv.slice(2), process.env, {
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
}).then(
  // Exit at once, whatever is still open (a stdin never read to its end): a Job must not hang. Writes
  // to pipes, files and terminals are synchronous on Linux, so nothing written is lost.
  (status) => process.exit(status),
  (err: unknown) => {
    process.stderr.write(`admin: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(EXIT_FAILED);
  },
);
