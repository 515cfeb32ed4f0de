// Priority under overload (issue 46): sheddable reads — pages of the payments list past the first,
// asked with a cursor — offered open loop at 3× what the mesh serves of them, beside a closed loop of
// critical writers creating payments (the same service, the same core). With priorities, at least
// 99 % of the critical requests must be answered 2xx, and the goodput of the whole (2xx a second,
// reads and writes) must not fall below the same run with priorities off (GATEWAY_PRIORITIES=false:
// every request default), which shows the difference. Each run on a mesh of its own, the load
// generator on one core and the mesh on the other; runs alternate off, on, off, on, ….
// Run with measurePriority() from bench/run.ts, or alone: `tsx bench/priority.ts [seconds] [starts]`.
import autocannon from "autocannon";
import { randomUUID } from "node:crypto";
import { pathToFileURL } from "node:url";
import { fire } from "./load/http-load.js";
import { Latencies } from "./load/latency.js";
import { measureOpenLoop, type OpenLoopResult, type OpenLoopTarget } from "./load/open-loop.js";
import { PAYMENT_BODY, startMeshFixture, type MeshFixture } from "./mesh-fixture.js";
import { pinGeneratorAndMesh } from "./pinning.js";
import { killAll } from "./processes.js";
import type { SummaryRow } from "./summary.js";

/** At least this share of the critical requests answered 2xx under the sheddable flood, with priorities. */
export const CRITICAL_OK_TARGET = 0.99;
/** The sheddable reads' rate, × the capacity measured for them alone on the same mesh. */
export const SHEDDABLE_FACTOR = 3;
/** Critical writers, each sending its next payment when the last is answered (BENCH_PRIORITY_WRITERS). */
export const CRITICAL_WRITERS = 2;
const CAPACITY_CONNECTIONS = 32;
const OPEN_LOOP_SOCKETS = 256;
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
  seconds: number;
  sheddable: OpenLoopResult;
  critical: CriticalLoopResult;
  /** 2xx a second of both loads together. */
  goodputPerSec: number;
  /** The gateway's own sheds, by priority (the rest of the 503s are the services'). */
  gatewayShed: Record<string, number>;
}

export interface PriorityResult {
  runs: PriorityRun[];
  /** The critical writers beside the flood. */
  writers: number;
  /** With priorities on: the lowest critical 2xx share of its runs. */
  criticalOkShare: number;
  /** Goodput with priorities on ÷ goodput off (means over the runs). */
  goodputRatio: number;
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

/** One run on a mesh of its own. */
export async function measurePriorityRun(priorities: boolean, seconds: number, writers: number): Promise<PriorityRun> {
  const mesh = await startMeshFixture({ limit: "adaptive", env: { GATEWAY_PRIORITIES: String(priorities) } });
  const pinning = pinGeneratorAndMesh(Object.values(mesh.processes));
  try {
    const page = await laterPage(mesh);
    // What the mesh serves of the page alone: a closed loop is never shed.
    await fire({ url: page.url, headers: page.headers }, CAPACITY_CONNECTIONS, 2);
    const capacity = await fire({ url: page.url, headers: page.headers }, CAPACITY_CONNECTIONS, 5);
    const rate = capacity.reqPerSec * SHEDDABLE_FACTOR;
    // A third of capacity first: warm code, and the limit learns the latency without a queue.
    await measureOpenLoop(page, { rate: capacity.reqPerSec * 0.3, seconds: 5, sockets: OPEN_LOOP_SOCKETS });
    const [sheddable, critical] = await Promise.all([
      measureOpenLoop(page, { rate, seconds, sockets: OPEN_LOOP_SOCKETS }),
      criticalWriters(mesh, seconds, writers),
    ]);
    const gatewayShed = await shedByPriority(mesh.gatewayUrl);
    const criticalOk = Object.entries(critical.statusCodes)
      .filter(([code]) => code.startsWith("2"))
      .reduce((n, [, count]) => n + count, 0);
    return {
      priorities,
      capacityPerSec: capacity.reqPerSec,
      seconds,
      sheddable,
      critical,
      goodputPerSec: okPerSec(sheddable) + criticalOk / seconds,
      gatewayShed,
    };
  } finally {
    pinning.undo();
    await mesh.stop();
  }
}

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);

/** `starts` runs with priorities off and as many on, alternating. */
export async function measurePriority(
  seconds: number,
  starts: number,
  writers = CRITICAL_WRITERS,
): Promise<PriorityResult> {
  const runs: PriorityRun[] = [];
  for (let i = 0; i < starts; i++)
    for (const priorities of [false, true]) {
      console.error(`  priority: run ${i + 1} of ${starts}, priorities ${priorities ? "on" : "off"} …`);
      runs.push(await measurePriorityRun(priorities, seconds, writers));
    }
  const on = runs.filter((r) => r.priorities);
  const off = runs.filter((r) => !r.priorities);
  const criticalOkShare = Math.min(...on.map((r) => r.critical.okShare));
  const goodputRatio = mean(on.map((r) => r.goodputPerSec)) / mean(off.map((r) => r.goodputPerSec));
  return {
    runs,
    writers,
    criticalOkShare,
    goodputRatio,
    pass: criticalOkShare >= CRITICAL_OK_TARGET && goodputRatio >= 1,
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
      `  priorities ${r.priorities ? "on " : "off"}: capacity ${r.capacityPerSec.toFixed(0)}/s; critical ${r.critical.requests} sent, ${pct(r.critical.okShare)} 2xx (${JSON.stringify(r.critical.statusCodes)}${r.critical.failures ? `, ${r.critical.failures} failed` : ""}), p50 ${r.critical.p50Ms.toFixed(0)} ms, p99 ${r.critical.p99Ms.toFixed(0)} ms; sheddable ${r.sheddable.sent} sent, ${pct(shedOk / Math.max(1, r.sheddable.sent))} 2xx; goodput ${r.goodputPerSec.toFixed(0)}/s; the gateway shed ${JSON.stringify(r.gatewayShed)}`,
    );
  }
  out.push(
    `  critical 2xx with priorities (lowest run): ${pct(result.criticalOkShare)} (target ≥ ${pct(CRITICAL_OK_TARGET)}); goodput on ÷ off: ${result.goodputRatio.toFixed(2)} (target ≥ 1.00) — ${result.pass ? "PASS" : "FAIL"}`,
  );
  return out;
}

/** The summary's rows: critical answered with priorities, and goodput on ÷ off. */
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
      figure: "priorities: goodput on ÷ off (2xx a second, the same load)",
      value: ok?.goodputRatio.toFixed(2),
      target: "≥ 1.00",
      pass: ok !== undefined && ok.goodputRatio >= 1,
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
