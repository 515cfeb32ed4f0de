// The runtimes `npm run bench` runs on (issue 46): the Node that runs it, and the image's — the one
// production runs (deploy/Dockerfile, Node 24 LTS), fetched by scripts/node-runtime.mjs. BENCH_RUNTIMES
// names them by major version ("20,24", the default: both); a run on a runtime other than this
// process's is the whole benchmark — load generator, mesh and references alike — in a child process
// on that Node, whose summary rows come back through a file, so that one table holds every runtime's.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync } from "node:fs";
import { readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { IMAGE_NODE, imageNodeDir } from "../scripts/node-runtime.mjs";
import { ROOT, stopChild, track } from "./processes.js";
import type { RuntimeSummary, SummaryRow } from "./summary.js";

/** Where a child run writes its summary rows (set by the run that started it). */
export const SUMMARY_FILE_ENV = "BENCH_SUMMARY_FILE";

export interface Runtime {
  /** "Node 24.18.1 (the image's)". */
  name: string;
  /** Its major version, as BENCH_RUNTIMES names it. */
  major: string;
  /** The directory of its `node`. */
  dir: string;
  /** This process runs on it. */
  current: boolean;
}

const majorOf = (version: string) => version.replace(/^v/, "").split(".")[0]!;
const IMAGE_MAJOR = majorOf(IMAGE_NODE.version);
const THIS_MAJOR = majorOf(process.version);

/** BENCH_RUNTIMES: majors, comma-separated — this process's Node and the image's; unset, both. */
export function benchRuntimes(setting = `${THIS_MAJOR},${IMAGE_MAJOR}`): Runtime[] {
  const runtimes: Runtime[] = [];
  for (const major of new Set(setting.split(",").map((m) => m.trim()))) {
    if (major === IMAGE_MAJOR) {
      const dir = imageNodeDir();
      runtimes.push({
        name: `Node ${IMAGE_NODE.version} (the image's)`,
        major,
        dir,
        current: dir === dirname(process.execPath),
      });
    } else if (major === THIS_MAJOR) {
      runtimes.push({ name: `Node ${process.versions.node}`, major, dir: dirname(process.execPath), current: true });
    } else {
      throw new Error(
        `BENCH_RUNTIMES names Node majors, of ${THIS_MAJOR} (this one) and ${IMAGE_MAJOR} (the image's), not "${major}"`,
      );
    }
  }
  return runtimes;
}

/** A run of the benchmark on a runtime in a child process: its exit code and summary, once it ends. */
export interface RuntimeRun {
  readonly done: Promise<{ code: number; summary: RuntimeSummary }>;
  stop(): Promise<void>;
}

export function runOn(runtime: Runtime): RuntimeRun {
  const dir = mkdtempSync(join(tmpdir(), "switchyard-bench-runtime-"));
  const summaryFile = join(dir, "summary.json");
  const child = spawn(join(runtime.dir, "node"), ["--import", "tsx", "bench/run.ts"], {
    cwd: ROOT,
    env: {
      ...process.env,
      // What it starts (`node` on PATH, or its own execPath) runs on it too.
      PATH: `${runtime.dir}${delimiter}${process.env.PATH ?? ""}`,
      BENCH_RUNTIMES: runtime.major,
      [SUMMARY_FILE_ENV]: summaryFile,
    },
    stdio: "inherit",
  });
  track(child);
  const done = (async () => {
    const [code, signal] = (await once(child, "exit")) as [number | null, string | null];
    try {
      const rows = JSON.parse(await readFile(summaryFile, "utf8")) as SummaryRow[];
      return { code: code ?? 1, summary: { runtime: runtime.name, rows } };
    } catch {
      const error = `its run ended without a summary (code ${code}, signal ${signal})`;
      return { code: code || 1, summary: { runtime: runtime.name, rows: { error } } };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  })();
  return { done, stop: () => stopChild(child) };
}
