// The printed report and the JSON record of one run.
import { mkdir, writeFile } from "node:fs/promises";
import { availableParallelism, cpus } from "node:os";
import { join } from "node:path";
import type { GrpcLoadResult } from "./load/grpc-load.js";
import type { HttpLoadResult } from "./load/http-load.js";
import { ROOT } from "./processes.js";

export const READ_PATH_TARGET = 0.85;
/** Issue 46: every same-work read path on both engines, on at least one runtime. */
export const SAME_WORK_TARGET = 0.9;
/** Above this share of the machine's CPU used by others during a scenario, its numbers are suspect. */
const NOISY_OTHER_CPU_PCT = 10;

export interface Outcome<R> {
  id: string;
  label: string;
  result?: R;
  error?: string;
}
export type LibraryOutcome = Outcome<GrpcLoadResult>;
export type HttpOutcome = Outcome<HttpLoadResult>;

export interface Settings {
  inFlight: number;
  warmupSeconds: number;
  seconds: number;
}

const num = (n: number | undefined, digits = 0) =>
  n === undefined || Number.isNaN(n)
    ? "—"
    : n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
const ratio = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined || b === 0 ? undefined : a / b;
const pct = (n: number | undefined) => (n === undefined ? "?" : `${n.toFixed(0)}%`);
const x = (r: number | undefined) => (r === undefined ? "—" : `${r.toFixed(2)}×`);

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    "  " + cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  return [line(header), line(widths.map((w) => "─".repeat(w))), ...rows.map(line)].join("\n");
}

function find<R>(outcomes: Outcome<R>[], id: string): R | undefined {
  return outcomes.find((o) => o.id === id)?.result;
}

export function libraryRatios(rows: LibraryOutcome[]) {
  return {
    /** Same grpc-js client: grpc-js server vs connect-node server. */
    serverGrpcJsOverConnect: ratio(find(rows, "grpcjs-grpcjs")?.callsPerSec, find(rows, "grpcjs-connect")?.callsPerSec),
    /** Same grpc-js server: our grpc-js client vs connect's gRPC transport. */
    clientGrpcJsOverConnect: ratio(find(rows, "grpcjs-grpcjs")?.callsPerSec, find(rows, "connect-grpcjs")?.callsPerSec),
  };
}

export function httpRatios(rows: HttpOutcome[]) {
  const raw = find(rows, "raw");
  const hop = find(rows, "bare-hop");
  const ratios = Object.fromEntries(
    rows.map((o) => [
      o.id,
      {
        reqPerSecVsRaw: ratio(o.result?.reqPerSec, raw?.reqPerSec),
        reqPerSecVsBareHop: ratio(o.result?.reqPerSec, hop?.reqPerSec),
        p50VsBareHop: ratio(o.result?.p50Ms, hop?.p50Ms),
      },
    ]),
  );
  const readRatio = ratios["read"]?.reqPerSecVsBareHop;
  const hopOverReadCpu = ratio(hop?.serverCpuMsPerRequest, find(rows, "read")?.serverCpuMsPerRequest);
  return {
    ratios,
    target: {
      threshold: READ_PATH_TARGET,
      readVsBareHop: readRatio,
      pass: readRatio === undefined ? undefined : readRatio >= READ_PATH_TARGET,
      hopOverReadCpu,
    },
  };
}

export function printReport(settings: Settings, library: LibraryOutcome[], http: HttpOutcome[]): void {
  const out: string[] = [];
  out.push(
    `Switchyard benchmark — ${availableParallelism()} CPU(s) (${cpus()[0]?.model.trim() ?? "?"}), node ${process.version}, 127.0.0.1 only`,
  );
  out.push(
    `each scenario: ${settings.warmupSeconds} s warm-up (discarded) + ${settings.seconds} s measured, ${settings.inFlight} requests in flight; every server in its own process`,
  );

  if (library.length > 0) printLibrary(out, settings, library);
  if (http.length > 0) printHttp(out, settings, http);
  console.log(out.join("\n"));
}

function printLibrary(out: string[], settings: Settings, library: LibraryOutcome[]): void {
  out.push("", `A. gRPC library choice — unary Echo, closed loop, ${settings.inFlight} calls in flight`);
  out.push(
    table(
      ["client → server", "calls/s", "p50 ms", "p99 ms", "srv CPU ms/call", "other CPU"],
      library.map((o) =>
        o.result
          ? [
              o.label,
              num(o.result.callsPerSec),
              num(o.result.p50Ms, 2),
              num(o.result.p99Ms, 2),
              num(o.result.serverCpuMsPerRequest, 3),
              pct(o.result.otherCpuPct),
            ]
          : [o.label, `FAILED: ${o.error}`, "", "", "", ""],
      ),
    ),
  );
  const lib = libraryRatios(library);
  out.push(`  server, same grpc-js client:   grpc-js / connect-node     = ${x(lib.serverGrpcJsOverConnect)} calls/s`);
  out.push(`  client, same grpc-js server:   grpc-js / connect transport = ${x(lib.clientGrpcJsOverConnect)} calls/s`);
  const noisy = library.filter((o) => (o.result?.otherCpuPct ?? 0) > NOISY_OTHER_CPU_PCT);
  if (noisy.length > 0) out.push(noisyWarning(noisy.length, library.length));
}

function noisyWarning(noisy: number, of: number): string {
  return `  ⚠ other work used > ${NOISY_OTHER_CPU_PCT}% of the machine during ${noisy} of ${of} scenarios (see "other CPU"): their req/s and latencies are low and noisy — rerun on a quiet machine; the CPU-per-request columns hold up better.`;
}

function printHttp(out: string[], settings: Settings, http: HttpOutcome[]): void {
  out.push("", `B. HTTP paths — autocannon, ${settings.inFlight} connections, pipelining 1`);
  const { ratios, target } = httpRatios(http);
  out.push(
    table(
      [
        "scenario",
        "req/s",
        "p50 ms",
        "p99 ms",
        "non-2xx",
        "req/s ÷ raw",
        "req/s ÷ hop",
        "p50 ÷ hop",
        "srv CPU ms/req",
        "other CPU",
      ],
      http.map((o) => {
        const r = ratios[o.id]!;
        return o.result
          ? [
              o.label,
              num(o.result.reqPerSec),
              num(o.result.p50Ms, 2),
              num(o.result.p99Ms, 2),
              num(o.result.non2xx),
              x(r.reqPerSecVsRaw),
              x(r.reqPerSecVsBareHop),
              x(r.p50VsBareHop),
              num(o.result.serverCpuMsPerRequest, 3),
              pct(o.result.otherCpuPct),
            ]
          : [o.label, `FAILED: ${o.error}`, "", "", "", "", "", "", "", ""];
      }),
    ),
  );
  const verdict = target.pass === undefined ? "NOT MEASURED" : target.pass ? "PASS" : "MISS";
  out.push(
    `  target: GET /v1/payments/{id} ≥ ${READ_PATH_TARGET} × bare hop req/s → ${x(target.readVsBareHop)} → ${verdict}`,
  );
  out.push(`  informative (no target): POST /v1/payments = ${x(ratios["write"]?.reqPerSecVsBareHop)} bare hop req/s`);
  out.push(
    `  CPU view (less sensitive to other load): bare hop ÷ read path server CPU per request = ${x(target.hopOverReadCpu)}`,
  );
  for (const o of http) {
    const by = o.result?.cpuMsPerRequestBy;
    const loadGenerator = o.result?.loadGeneratorCpuMsPerRequest;
    if (by && Object.keys(by).length > 0)
      out.push(
        `  CPU ms per request, ${o.label.split(" (")[0]}: ${Object.entries(by)
          .map(([name, ms]) => `${name} ${ms.toFixed(3)}`)
          .join(", ")}${loadGenerator === undefined ? "" : `; load generator ${loadGenerator.toFixed(3)}`}`,
      );
  }
  const noisy = http.filter((o) => (o.result?.otherCpuPct ?? 0) > NOISY_OTHER_CPU_PCT);
  out.push(
    "",
    "  srv CPU = CPU time of all server processes of the scenario per request; other CPU = share of the whole machine used by processes outside the benchmark while measuring.",
  );
  if (noisy.length > 0) out.push(noisyWarning(noisy.length, http.length));
}

/** Writes `.bench/results-<timestamp>.json` and returns its path. */
export async function writeResults(
  startedAt: Date,
  settings: Settings,
  library: LibraryOutcome[],
  http: HttpOutcome[],
  extra: object = {},
): Promise<string> {
  const dir = join(ROOT, ".bench");
  await mkdir(dir, { recursive: true });
  const file = join(dir, `results-${startedAt.toISOString().replace(/[:.]/g, "-")}.json`);
  const record = {
    startedAt: startedAt.toISOString(),
    machine: {
      cpus: availableParallelism(),
      cpuModel: cpus()[0]?.model.trim(),
      node: process.version,
      platform: process.platform,
    },
    settings,
    library: { scenarios: library, ratios: libraryRatios(library) },
    http: { scenarios: http, ...httpRatios(http) },
    ...extra,
  };
  await writeFile(file, JSON.stringify(record, null, 2) + "\n");
  return file;
}
