// Priority under overload (issue 46): sheddable reads — pages of the payments list past the first,
// asked with a cursor — offered open loop at 3× what the mesh serves of them, beside a closed loop of
// critical writers creating payments (the same service, the same core). With priorities, at least
// 99 % of the critical requests must be answered 2xx, and the goodput of the whole must not fall
// below the same load with priorities off (GATEWAY_PRIORITIES=false: every request default), which
// shows the difference. Goodput is the work answered 2xx a second: each read one, each write the page
// reads it costs the mesh (measured alone, on the same meshes) — in requests, one write let in where
// eight reads were would count as a loss of seven though the mesh did as much (printed too). Each start is a pair of meshes, one with
// priorities off and one on, loaded in turn at one rate (measurePriorityPair); the load generator on
// one core and the meshes on the other; which goes first alternates from pair to pair.
// Run with measurePriority() from bench/run.ts, or alone: `tsx bench/priority.ts [seconds] [starts]`.
import autocannon from "autocannon";
import { randomUUID } from "node:crypto";
import { pathToFileURL } from "node:url";
import { fire } from "./load/http-load.js";
import { Latencies } from "./load/latency.js";
import { measureOpenLoop, type OpenLoopResult, type OpenLoopTarget } from "./load/open-loop.js";
import { PAYMENT_BODY, startMeshFixture, type MeshFixture } from "./mesh-fixture.js";
import { cpuSeconds } from "./machine.js";
import { pinGeneratorAndMesh } from "./pinning.js";
import { killAll } from "./processes.js";
import { NO_TARGET, type SummaryRow } from "./summary.js";

/** At least this share of the critical requests answered 2xx under the sheddable flood, with priorities. */
export const CRITICAL_OK_TARGET = 0.99;
/** The sheddable reads' rate, × the capacity measured for them alone on the same mesh. */
export const SHEDDABLE_FACTOR = 3;
/** Critical writers, each sending its next payment when the last is answered (BENCH_PRIORITY_WRITERS). */
export const CRITICAL_WRITERS = 2;
const CAPACITY_CONNECTIONS = 32;
const OPEN_LOOP_SOCKETS = 256;
/** The writers alone, to learn what a write costs the mesh. */
const WRITE_COST_SECONDS = 3;
/** The flood before each measured run, unmeasured. */
const FLOOD_WARMUP_SECONDS = 4;
/** Payments created first, so that the pages past the first exist. */
const SEEDED_PAYMENTS = 40;

export interface CriticalLoopResult {
  requests: number;
  statusCodes: Record<string, number>;
  /** Connection errors and timeouts (each a failed critical request). */
  failures: number;
  /** 2xx ÷ (requests + failures). */
  okShare: number;
  p50Ms: number;
  p99Ms: number;
}

export interface PriorityRun {
  priorities: boolean;
  /** Sheddable page reads a second the mesh served alone (closed loop, 32 connections, not shed). */
  capacityPerSec: number;
  /** The sheddable reads offered a second: 3× the mean capacity of the pair (the same for both of its runs). */
  offeredPerSec: number;
  seconds: number;
  sheddable: OpenLoopResult;
  critical: CriticalLoopResult;
  /** 2xx a second of both loads together. */
  goodputPerSec: number;
  /** What a critical write costs the mesh, in sheddable page reads (measured alone on the pair's meshes). */
  writeCostInReads: number;
  /** The work answered 2xx a second, in page reads: each read 1, each write `writeCostInReads`. */
  workPerSec: number;
  /** The gateway's own sheds, by priority (the rest of the 503s are the services'). */
  gatewayShed: Record<string, number>;
}

export interface PriorityResult {
  runs: PriorityRun[];
  /** The critical writers beside the flood. */
  writers: number;
  /** With priorities on: the lowest critical 2xx share of its runs. */
  criticalOkShare: number;
  /** Goodput with priorities on ÷ goodput off (means over the runs), in requests. */
  goodputRatio: number;
  /** The same in work (a write counted as the reads it costs): what decides, with criticalOkShare. */
  workRatio: number;
  pass: boolean;
}

/** Closed-loop critical writers: POST /v1/payments with a fresh Idempotency-Key each, any status counted. */
function criticalWriters(mesh: MeshFixture, seconds: number, writers: number): Promise<CriticalLoopResult> {
  const statusCodes: Record<string, number> = {};
  const latencies = new Latencies();
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: `${mesh.gatewayUrl}/v1/payments`,
        connections: writers,
        pipelining: 1,
        duration: seconds,
        timeout: 10,
        requests: [
          {
            method: "POST",
            headers: { authorization: `Bearer ${mesh.token}`, "content-type": "application/json" },
            body: PAYMENT_BODY,
            setupRequest: (req: autocannon.Request) => ({
              ...req,
              headers: { ...req.headers, "idempotency-key": randomUUID() },
            }),
          },
        ],
      },
      (err: unknown, result: autocannon.Result) => {
        if (err) return reject(err instanceof Error ? err : new Error(String(err)));
        const requests = Object.values(statusCodes).reduce((a, b) => a + b, 0);
        const ok = Object.entries(statusCodes)
          .filter(([code]) => code.startsWith("2"))
          .reduce((n, [, count]) => n + count, 0);
        const failures = result.errors + result.timeouts;
        resolve({
          requests,
          statusCodes,
          failures,
          okShare: requests + failures > 0 ? ok / (requests + failures) : 0,
          p50Ms: latencies.percentileMs(50),
          p99Ms: latencies.percentileMs(99),
        });
      },
    );
    instance.on("response", (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
      statusCodes[statusCode] = (statusCodes[statusCode] ?? 0) + 1;
      latencies.record(responseTime);
    });
  });
}

/** A page of the payments list past the first (a cursor): sheddable. */
async function laterPage(mesh: MeshFixture): Promise<OpenLoopTarget> {
  const headers = { authorization: `Bearer ${mesh.token}` };
  for (let i = 0; i < SEEDED_PAYMENTS; i++) {
    const res = await fetch(`${mesh.gatewayUrl}/v1/payments`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json", "idempotency-key": randomUUID() },
      body: PAYMENT_BODY,
    });
    if (res.status !== 201) throw new Error(`seeding payments: ${res.status} ${await res.text()}`);
  }
  const first = await fetch(`${mesh.gatewayUrl}/v1/payments?limit=10`, { headers });
  const { next_cursor: cursor } = (await first.json()) as { next_cursor: string | null };
  if (!cursor) throw new Error("the payments list has no second page");
  return { url: `${mesh.gatewayUrl}/v1/payments?limit=10&cursor=${encodeURIComponent(cursor)}`, headers };
}

const okPerSec = (r: OpenLoopResult) =>
  Object.entries(r.byStatus)
    .filter(([code]) => code.startsWith("2"))
    .reduce((n, [, s]) => n + s.count, 0) / r.seconds;

/** switchyard_gateway_shed_total by priority, from the gateway's /metrics. */
async function shedByPriority(gatewayUrl: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${gatewayUrl}/metrics`)).text();
  const shed: Record<string, number> = {};
  for (const m of text.matchAll(/^switchyard_gateway_shed_total\{[^}]*priority="(\w+)"[^}]*\} (\d+)/gm))
    shed[m[1]!] = Number(m[2]);
  return shed;
}

/** A mesh of the pair, with its page and the capacity measured for it. */
interface PairedMesh {
  priorities: boolean;
  mesh: MeshFixture;
  page: OpenLoopTarget;
  capacityPerSec: number;
  /** The mesh's CPU ms a page read and a payment write cost, each load alone. */
  readCpuMs: number;
  writeCpuMs: number;
}

async function preparedMesh(priorities: boolean): Promise<PairedMesh> {
  const mesh = await startMeshFixture({ limit: "adaptive", env: { GATEWAY_PRIORITIES: String(priorities) } });
  try {
    return { priorities, mesh, page: await laterPage(mesh), capacityPerSec: 0, readCpuMs: 0, writeCpuMs: 0 };
  } catch (err) {
    await mesh.stop();
    throw err;
  }
}

/** The mesh's processes' CPU seconds so far. */
const meshCpuSeconds = (mesh: MeshFixture) =>
  Object.values(mesh.processes).reduce((sum: number, pid) => sum + cpuSeconds(pid), 0);

/**
 * What the mesh serves of the page alone (a closed loop is never shed), and what a read and a write
 * cost it, each load alone: the writers' CPU ms a 2xx.
 */
async function measureCapacityAndCosts(m: PairedMesh, writers: number): Promise<void> {
  await fire({ url: m.page.url, headers: m.page.headers }, CAPACITY_CONNECTIONS, 2);
  let before = meshCpuSeconds(m.mesh);
  const capacity = await fire({ url: m.page.url, headers: m.page.headers }, CAPACITY_CONNECTIONS, 5);
  m.capacityPerSec = capacity.reqPerSec;
  m.readCpuMs = ((meshCpuSeconds(m.mesh) - before) * 1000) / capacity.requests;
  before = meshCpuSeconds(m.mesh);
  const written = await criticalWriters(m.mesh, WRITE_COST_SECONDS, writers);
  const ok = written.statusCodes["201"] ?? 0;
  if (ok === 0) throw new Error(`the writers alone got no 201: ${JSON.stringify(written.statusCodes)}`);
  m.writeCpuMs = ((meshCpuSeconds(m.mesh) - before) * 1000) / ok;
}

/** The flood and the writers on one mesh of the pair, at the pair's rate. */
async function floodRun(
  m: PairedMesh,
  load: { rate: number; writeCostInReads: number },
  seconds: number,
  writers: number,
): Promise<PriorityRun> {
  const { rate, writeCostInReads } = load;
  // A tenth of the rate first (a third of capacity): the limit learns the latency without a queue.
  await measureOpenLoop(m.page, { rate: rate / 10, seconds: 2, sockets: OPEN_LOOP_SOCKETS });
  // Then the flood itself, unmeasured: a mesh's first seconds of it ran 5-25 % below its later ones
  // (its refusals' code not yet optimised, its heap not yet grown to the load).
  await measureOpenLoop(m.page, { rate, seconds: FLOOD_WARMUP_SECONDS, sockets: OPEN_LOOP_SOCKETS });
  const shedBefore = await shedByPriority(m.mesh.gatewayUrl);
  const [sheddable, critical] = await Promise.all([
    measureOpenLoop(m.page, { rate, seconds, sockets: OPEN_LOOP_SOCKETS }),
    criticalWriters(m.mesh, seconds, writers),
  ]);
  const shedAfter = await shedByPriority(m.mesh.gatewayUrl);
  const gatewayShed = Object.fromEntries(
    Object.entries(shedAfter).map(([priority, n]) => [priority, n - (shedBefore[priority] ?? 0)]),
  );
  const criticalOk = Object.entries(critical.statusCodes)
    .filter(([code]) => code.startsWith("2"))
    .reduce((n, [, count]) => n + count, 0);
  return {
    priorities: m.priorities,
    capacityPerSec: m.capacityPerSec,
    offeredPerSec: rate,
    seconds,
    sheddable,
    critical,
    goodputPerSec: okPerSec(sheddable) + criticalOk / seconds,
    writeCostInReads,
    workPerSec: okPerSec(sheddable) + (writeCostInReads * criticalOk) / seconds,
    gatewayShed,
  };
}

/**
 * One start: a mesh with priorities off and one with them on, side by side (the idle one costs
 * nothing), both loaded at one rate — 3× the mean of their two capacities — in turn, twice each:
 * first, second, second, first (`offFirst` says which is first). One rate, because the flood's cost
 * is most of what the mesh spends: at 3× a capacity measured 5 % high, the gateway refuses 5 % more
 * and serves less, and runs at rates of their own moved goodput more than priorities did (measured:
 * 990–1,373 req/s for one setting, in step with each run's own capacity).
 */
export async function measurePriorityPair(seconds: number, writers: number, offFirst: boolean): Promise<PriorityRun[]> {
  const pair: PairedMesh[] = [];
  try {
    for (const priorities of [false, true]) pair.push(await preparedMesh(priorities));
    const pinning = pinGeneratorAndMesh(pair.flatMap((m) => Object.values(m.mesh.processes)));
    try {
      for (const m of pair) await measureCapacityAndCosts(m, writers);
      const load = {
        rate: SHEDDABLE_FACTOR * mean(pair.map((m) => m.capacityPerSec)),
        writeCostInReads: mean(pair.map((m) => m.writeCpuMs)) / mean(pair.map((m) => m.readCpuMs)),
      };
      const [first, second] = offFirst ? pair : [pair[1]!, pair[0]!];
      const runs: PriorityRun[] = [];
      // First, second, second, first: a drift over the pair's minutes (a warming generator, the
      // machine's phase) falls on both alike.
      for (const m of [first!, second!, second!, first!]) runs.push(await floodRun(m, load, seconds, writers));
      return runs;
    } finally {
      pinning.undo();
    }
  } finally {
    for (const m of pair) await m.mesh.stop();
  }
}

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);

/** `starts` pairs, priorities off and on at one rate each; the order within a pair alternates. */
export async function measurePriority(
  seconds: number,
  starts: number,
  writers = CRITICAL_WRITERS,
): Promise<PriorityResult> {
  const runs: PriorityRun[] = [];
  for (let i = 0; i < starts; i++) {
    const offFirst = i % 2 === 0;
    console.error(
      `  priority: pair ${i + 1} of ${starts}, priorities ${offFirst ? "off, on, on, off" : "on, off, off, on"} …`,
    );
    runs.push(...(await measurePriorityPair(seconds, writers, offFirst)));
  }
  const on = runs.filter((r) => r.priorities);
  const off = runs.filter((r) => !r.priorities);
  const criticalOkShare = Math.min(...on.map((r) => r.critical.okShare));
  const goodputRatio = mean(on.map((r) => r.goodputPerSec)) / mean(off.map((r) => r.goodputPerSec));
  const workRatio = mean(on.map((r) => r.workPerSec)) / mean(off.map((r) => r.workPerSec));
  return {
    runs,
    writers,
    criticalOkShare,
    goodputRatio,
    workRatio,
    pass: criticalOkShare >= CRITICAL_OK_TARGET && workRatio >= 1,
  };
}

const pct = (share: number) => `${(share * 100).toFixed(1)} %`;

export function formatPriority(result: PriorityResult | { error: string } | undefined): string[] {
  const writers = result && "writers" in result ? result.writers : CRITICAL_WRITERS;
  const out = [
    `  sheddable payment-list pages (a cursor) at ${SHEDDABLE_FACTOR}× their capacity, open loop, beside ${writers} closed-loop critical payment writers; generator and mesh on a core each:`,
  ];
  if (!result) return [...out, "  not run this time (BENCH_ONLY)"];
  if ("error" in result) return [...out, `  FAILED: ${result.error}`];
  for (const r of result.runs) {
    const shedOk = Object.entries(r.sheddable.byStatus)
      .filter(([code]) => code.startsWith("2"))
      .reduce((n, [, s]) => n + s.count, 0);
    out.push(
      `  priorities ${r.priorities ? "on " : "off"}: capacity ${r.capacityPerSec.toFixed(0)}/s, offered ${r.offeredPerSec.toFixed(0)}/s; critical ${r.critical.requests} sent, ${pct(r.critical.okShare)} 2xx (${JSON.stringify(r.critical.statusCodes)}${r.critical.failures ? `, ${r.critical.failures} failed` : ""}), p50 ${r.critical.p50Ms.toFixed(0)} ms, p99 ${r.critical.p99Ms.toFixed(0)} ms; sheddable ${r.sheddable.sent} sent, ${pct(shedOk / Math.max(1, r.sheddable.sent))} 2xx; goodput ${r.goodputPerSec.toFixed(0)} req/s, ${r.workPerSec.toFixed(0)} reads' work/s (a write = ${r.writeCostInReads.toFixed(1)} reads); the gateway shed ${JSON.stringify(r.gatewayShed)}`,
    );
  }
  out.push(
    `  critical 2xx with priorities (lowest run): ${pct(result.criticalOkShare)} (target ≥ ${pct(CRITICAL_OK_TARGET)}); goodput on ÷ off in work: ${result.workRatio.toFixed(2)} (target ≥ 1.00) — ${result.pass ? "PASS" : "FAIL"}; in requests: ${result.goodputRatio.toFixed(2)}`,
  );
  return out;
}

/** The summary's rows: critical answered with priorities, and goodput on ÷ off (in work, and in requests). */
export function prioritySummaryRows(result: PriorityResult | { error: string } | undefined): SummaryRow[] {
  const ok = result && !("error" in result) ? result : undefined;
  return [
    {
      issue: "#46",
      figure: `priorities: critical writes answered 2xx beside sheddable reads at ${SHEDDABLE_FACTOR}×`,
      value: ok && pct(ok.criticalOkShare),
      target: `≥ ${pct(CRITICAL_OK_TARGET)}`,
      pass: ok !== undefined && ok.criticalOkShare >= CRITICAL_OK_TARGET,
    },
    {
      issue: "#46",
      figure: "priorities: goodput on ÷ off, the work answered 2xx a second (a write counts as the reads it costs)",
      value: ok?.workRatio.toFixed(2),
      target: "≥ 1.00",
      pass: ok !== undefined && ok.workRatio >= 1,
    },
    {
      issue: "#46",
      figure: "priorities: goodput on ÷ off, in requests answered 2xx a second",
      value: ok?.goodputRatio.toFixed(2),
      target: NO_TARGET,
      pass: undefined,
    },
  ];
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const seconds = Number(process.argv[2] ?? 10);
  const starts = Number(process.argv[3] ?? 1);
  try {
    const result = await measurePriority(seconds, starts);
    console.log(formatPriority(result).join("\n"));
  } finally {
    killAll();
  }
}
