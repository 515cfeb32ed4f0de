// Startup time and idle memory of the mesh (`npm run bench:footprint`, or measureFootprint() from
// another script): starts it as `npm start` does (scripts/mesh.ts, demo data) on an empty data
// directory, then again on the same one; for each run, the time until the mesh is ready (the gateway
// ready, every service SERVING: when npm start prints its line; npm start builds first, ~0.5 s more),
// the CPU each process used until then (what a busy machine does not distort) and each process's
// resident memory (VmRSS) 10 s after ready and once idle. Idle means settled: V8 keeps the young
// generation it grew while starting (up to 2 × 16 MiB) until its memory reducer has seen a low
// allocation rate for a while and runs a shrinking GC — 20 to 45 s after ready here — so the target is
// held against the figure 90 s after ready, and the early one is printed beside it. Embedded storage; with
// measureFootprint({ databaseUrl }) a PostgreSQL server, each service in a schema of its own, dropped at the end.
import { mkdtemp, rm } from "node:fs/promises";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { serverSchemas } from "./server-schemas.js";
import { SERVICES, startMesh, type Mesh, type ServiceName } from "../scripts/mesh.js";
import { track } from "./processes.js";
import { cpuSeconds, rssMb } from "./machine.js";

/** Issue 16: `npm start` ready within 10 s on a first run, 5 s after; idle RSS per process. */
export const TARGETS = { firstRunMs: 10_000, laterRunMs: 5_000, rssMbEmbedded: 250, rssMbServer: 100 } as const;

export interface RunFootprint {
  readyMs: number;
  /** CPU seconds (user + system) each process had used when the mesh was ready: robust to a busy machine. */
  cpuSeconds: Record<ServiceName, number>;
  /** VmRSS in MiB per process, earlySeconds after ready (before V8's memory reducer has run). */
  rssEarlyMb: Record<ServiceName, number>;
  /** VmRSS in MiB per process, idleSeconds after ready: settled, what the target is held against. */
  rssMb: Record<ServiceName, number>;
  /** The machine's 1-minute load average at ready (other work on a shared machine slows the start). */
  loadAverage: number;
}

export interface Footprint {
  engine: "pglite" | "postgres";
  earlySeconds: number;
  idleSeconds: number;
  first: RunFootprint;
  second: RunFootprint;
}

async function run(
  dataDir: string,
  env: NodeJS.ProcessEnv,
  earlySeconds: number,
  idleSeconds: number,
): Promise<RunFootprint> {
  const started = performance.now();
  const mesh: Mesh = await startMesh({ dataDir, demoData: true, output: "collect", env });
  try {
    const readyMs = performance.now() - started;
    const names = Object.keys(SERVICES) as ServiceName[];
    const cpu = Object.fromEntries(names.map((n) => [n, cpuSeconds(mesh.process(n).pid)])) as Record<
      ServiceName,
      number
    >;
    const loadAverage = loadavg()[0]!;
    for (const name of names) track(mesh.process(name));
    const rssNow = () =>
      Object.fromEntries(names.map((n) => [n, rssMb(mesh.process(n).pid)])) as Record<ServiceName, number>;
    await sleep(earlySeconds * 1000);
    const early = rssNow();
    await sleep((idleSeconds - earlySeconds) * 1000);
    return { readyMs, cpuSeconds: cpu, rssEarlyMb: early, rssMb: rssNow(), loadAverage };
  } finally {
    await mesh.stop();
  }
}

export async function measureFootprint(
  options: { databaseUrl?: string | undefined; earlySeconds?: number; idleSeconds?: number } = {},
): Promise<Footprint> {
  const earlySeconds = options.earlySeconds ?? 10;
  const idleSeconds = Math.max(options.idleSeconds ?? 90, earlySeconds);
  const dataDir = await mkdtemp(join(tmpdir(), "switchyard-footprint-"));
  const server = options.databaseUrl ? serverSchemas(options.databaseUrl, "fp") : undefined;
  const env: NodeJS.ProcessEnv = { DATABASE_URL: "", REDIS_URL: "", LOG_LEVEL: "warn", ...server?.env };
  try {
    const first = await run(dataDir, env, earlySeconds, idleSeconds);
    const second = await run(dataDir, env, earlySeconds, idleSeconds);
    return { engine: options.databaseUrl ? "postgres" : "pglite", earlySeconds, idleSeconds, first, second };
  } finally {
    await rm(dataDir, { recursive: true, force: true });
    await server?.drop();
  }
}

export function formatFootprint(f: Footprint): string {
  const names = Object.keys(SERVICES) as ServiceName[];
  const rssTarget = f.engine === "pglite" ? TARGETS.rssMbEmbedded : TARGETS.rssMbServer;
  const verdict = (ok: boolean) => (ok ? "PASS" : "MISS");
  const line = (label: string, r: RunFootprint, targetMs: number) => {
    const worst = Math.max(...names.map((n) => r.rssMb[n]));
    return [
      `  ${label}: ready in ${(r.readyMs / 1000).toFixed(1)} s (target ≤ ${targetMs / 1000} s → ${verdict(r.readyMs <= targetMs)})`,
      `    CPU used until ready (s): ${names.map((n) => `${n} ${r.cpuSeconds[n].toFixed(1)}`).join(", ")}; machine load average ${r.loadAverage.toFixed(1)} on ${availableParallelism()} cores`,
      `    RSS ${f.earlySeconds} s after ready (MiB, young generation not yet shrunk): ${names.map((n) => `${n} ${r.rssEarlyMb[n].toFixed(0)}`).join(", ")}`,
      `    idle RSS, settled ${f.idleSeconds} s after ready (MiB): ${names.map((n) => `${n} ${r.rssMb[n].toFixed(0)}`).join(", ")} (target ≤ ${rssTarget} each → ${verdict(worst <= rssTarget)})`,
    ].join("\n");
  };
  return [
    `Footprint — ${f.engine === "pglite" ? "embedded storage (PGlite)" : "PostgreSQL server (DATABASE_URL)"}, demo data, as npm start`,
    line("first run (empty data directory)", f.first, TARGETS.firstRunMs),
    line("second run (same data directory)", f.second, TARGETS.laterRunMs),
  ].join("\n");
}

// Run directly: embedded storage, and the server too when DATABASE_URL is set.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const results = [await measureFootprint()];
  if (process.env.DATABASE_URL) results.push(await measureFootprint({ databaseUrl: process.env.DATABASE_URL }));
  console.log(results.map(formatFootprint).join("\n\n"));
  console.log(JSON.stringify(results));
}
