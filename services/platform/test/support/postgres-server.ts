// A PostgreSQL server of a test's own, to restart, stop and cut at will: initdb and pg_ctl of the
// machine's PostgreSQL (PG_BIN, else /usr/lib/postgresql/<newest>/bin), its own data directory and
// port. The shared server of DATABASE_URL is never restarted by a test. As root (CI here), the server
// runs as the `postgres` user: PostgreSQL refuses to run as root.
import { execFile } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { freePort } from "./free-port.js";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";

const run = promisify(execFile);

export type StopMode = "smart" | "fast" | "immediate";

export interface PostgresServer {
  /** postgres://postgres@127.0.0.1:<port>/postgres (trust authentication). */
  readonly url: string;
  readonly port: number;
  start(): Promise<void>;
  stop(mode?: StopMode): Promise<void>;
  restart(mode?: StopMode): Promise<void>;
  /** Ends every backend but this one's (pg_terminate_backend), as an operator or a failover would. */
  terminateBackends(): Promise<number>;
  /** Runs one statement on a connection of its own. */
  sql<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
  /** Stops the server and removes its directory. */
  destroy(): Promise<void>;
}

/** The directory of initdb and pg_ctl, or why there is none. */
export function postgresBinaries(): { bin: string } | { missing: string } {
  const fromEnv = process.env.PG_BIN;
  if (fromEnv)
    return existsSync(join(fromEnv, "pg_ctl")) ? { bin: fromEnv } : { missing: `PG_BIN=${fromEnv} has no pg_ctl` };
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, "bin", "initdb")))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  return versions[0]
    ? { bin: join(root, versions[0], "bin") }
    : { missing: "no PostgreSQL server binaries (initdb, pg_ctl) under /usr/lib/postgresql or PG_BIN" };
}

/** Creates and starts a server of the test's own; `{ skip }` with the reason when the machine has none. */
export async function startPostgresServer(): Promise<PostgresServer | { skip: string }> {
  const found = postgresBinaries();
  if ("missing" in found) return { skip: found.missing };
  const root = mkdtempSync(join(tmpdir(), "switchyard-pg-"));
  const data = join(root, "data");
  const asRoot = process.getuid?.() === 0;
  const owner = asRoot ? await postgresUser() : undefined;
  if (asRoot && !owner) return { skip: "running as root and there is no `postgres` user to run a server as" };
  if (owner) chownSync(root, owner.uid, owner.gid);
  const tool = (name: string, args: string[]) =>
    owner ? run("runuser", ["-u", "postgres", "--", join(found.bin, name), ...args]) : run(join(found.bin, name), args);
  await tool("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync", "--no-instructions"]);

  let port = 0;
  const options = () =>
    [
      `-p ${port}`,
      `-k ${root}`,
      "-c listen_addresses=127.0.0.1",
      // A test's server: nothing here must survive a power cut (the machine's), and every start must be
      // quick. A crash of the server itself (-m immediate) loses nothing committed: commits stay synchronous.
      "-c fsync=off",
      "-c full_page_writes=off",
      "-c max_connections=200",
    ].join(" ");
  const pgctl = (args: string[]) => tool("pg_ctl", ["-D", data, "-l", join(root, "server.log"), ...args]);
  const start = async () => {
    await pgctl(["-w", "-t", "30", "-o", options(), "start"]);
  };
  // The port is chosen free, then bound by the server: should another process take it between the
  // two, the start fails and another one is tried.
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    try {
      await start();
      break;
    } catch (err) {
      if (attempt >= 5) {
        rmSync(root, { recursive: true, force: true });
        throw err;
      }
    }
  }
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const sql = async <R>(text: string, params?: unknown[]): Promise<R[]> => {
    const client = new pg.Client({ connectionString: url });
    client.on("error", () => {});
    await client.connect();
    try {
      return (await client.query(text, params)).rows as R[];
    } finally {
      await client.end().catch(() => {});
    }
  };
  const running = async () => {
    try {
      await pgctl(["status"]);
      return true;
    } catch {
      return false;
    }
  };
  const stop = async (mode: StopMode = "fast") => {
    if (await running()) await pgctl(["-w", "-t", "30", "-m", mode, "stop"]);
  };
  return {
    url,
    port,
    start,
    stop,
    async restart(mode: StopMode = "fast") {
      await stop(mode);
      await start();
    },
    async terminateBackends() {
      const rows = await sql<{ n: string }>(
        `SELECT count(pg_terminate_backend(pid))::text AS n FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'`,
      );
      return Number(rows[0]?.n ?? 0);
    },
    sql,
    async destroy() {
      await stop("immediate").catch(() => {});
      rmSync(root, { recursive: true, force: true });
    },
  };
}

async function postgresUser(): Promise<{ uid: number; gid: number } | undefined> {
  try {
    const [uid, gid] = await Promise.all([run("id", ["-u", "postgres"]), run("id", ["-g", "postgres"])]);
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  } catch {
    return undefined;
  }
}
