// The read path as it was before a change, measured in the same run as today's (issue 12: with
// tracing off, observability may cost the read path at most 3 %). The earlier commit is checked out
// beside this one (a git worktree in the temp directory), installed from its own lock file, built,
// and its mesh started through its own bench fixture; the same load then runs against both.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { ROOT } from "./processes.js";

/**
 * main just before observability (metrics, request ids, access logs, tracing) landed on it with
 * b7d89dc: the embedded store's footprint work (--liftoff-only, a smaller shared_buffers) is in
 * both, so the comparison holds observability alone — and what landed on the read path since.
 */
export const BEFORE_OBSERVABILITY = "f9e109b";

/** What the read-path comparison needs of a mesh, today's or the earlier commit's (its own bench fixture). */
export interface BaselineFixture {
  gatewayUrl: string;
  token: string;
  paymentId: string;
  /** A document to read (fixtures from before it had one leave it out). */
  docId?: string;
  pids: Record<string, number | undefined>;
  /** Every process, replicas too, and every gateway's URL (fixtures from before replicas leave them out). */
  processes?: Record<string, number | undefined>;
  gatewayUrls?: string[];
  stop(): Promise<void>;
}

export interface Baseline {
  commit: string;
  /** Its mesh; on a PostgreSQL server with `databaseUrl` (a fixture from before that option runs embedded). */
  startMesh(options?: { databaseUrl?: string | undefined }): Promise<BaselineFixture>;
  remove(): Promise<void>;
}

/** Checks `ref` out beside this tree, installs and builds it. Throws when git or the commit is missing (a shallow clone). */
export async function prepareBaseline(ref: string, log: (line: string) => void): Promise<Baseline> {
  const commit = execFileSync("git", ["rev-parse", "--short", `${ref}^{commit}`], {
    cwd: ROOT,
    encoding: "utf8",
  }).trim();
  const dir = join(tmpdir(), `switchyard-baseline-${commit}`);
  const remove = async () => {
    try {
      execFileSync("git", ["worktree", "remove", "--force", dir], { cwd: ROOT, stdio: "ignore" });
    } catch {
      await rm(dir, { recursive: true, force: true });
      execFileSync("git", ["worktree", "prune"], { cwd: ROOT, stdio: "ignore" });
    }
  };
  if (existsSync(dir)) await remove();
  execFileSync("git", ["worktree", "add", "--detach", "--force", dir, commit], { cwd: ROOT, stdio: "ignore" });
  try {
    log(`  installing and building ${commit} beside this tree (${dir}) …`);
    execFileSync("npm", ["ci", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: dir, stdio: "ignore" });
    execFileSync(process.execPath, ["scripts/build.mjs", "--quiet"], { cwd: dir, stdio: "ignore" });
  } catch (err) {
    await remove();
    throw err;
  }
  const fixture = (await import(pathToFileURL(join(dir, "bench/mesh-fixture.ts")).href)) as {
    startMeshFixture(o: { limit: "none"; databaseUrl?: string | undefined }): Promise<BaselineFixture>;
  };
  return {
    commit,
    startMesh: (options) => fixture.startMeshFixture({ limit: "none", databaseUrl: options?.databaseUrl }),
    remove,
  };
}
