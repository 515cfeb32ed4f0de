// Scaling out on the PostgreSQL server (issue 34): GET /v1/payments/{id} through 1 or 2 gateways in
// front of 1 or 2 payments replicas (every other service one process), each shape a mesh of its own,
// all four running at once and loaded in turn (load/interleaved.ts); the load's connections are shared
// out evenly over a mesh's gateways, which count quotas in Redis when REDIS_URL is set. A replica adds
// no CPU to a machine whose cores the processes already fill: there the shapes can show whether one
// process was the limit (a second copy of one that kept its core busy lets the rest of the machine's
// CPU serve) and what the extra processes cost — not how a cluster of machines scales.
import type { InterleavedOptions, InterleavedResult, Setup } from "./load/interleaved.js";
import { measureInterleaved } from "./load/interleaved.js";

export interface Shape {
  gateways: number;
  payments: number;
}

export const SCALE_OUT_SHAPES: readonly Shape[] = [
  { gateways: 1, payments: 1 },
  { gateways: 2, payments: 1 },
  { gateways: 1, payments: 2 },
  { gateways: 2, payments: 2 },
];

export const shapeName = (s: Shape) => `${s.gateways} gateway${s.gateways > 1 ? "s" : ""} × ${s.payments} payments`;

export interface ScaleOutResult {
  /** Quotas counted in Redis (REDIS_URL). */
  redis: boolean;
  cores: number;
  shapes: (Shape & { result?: InterleavedResult })[];
}

/** Every shape's mesh serving the payment read (`setupOf`), interleaved; each shape's result under its own key. */
export async function measureScaleOut(
  setupOf: (shape: Shape) => Promise<Setup>,
  options: InterleavedOptions & { redis: boolean; cores: number },
): Promise<ScaleOutResult> {
  const setups = Object.fromEntries(SCALE_OUT_SHAPES.map((shape) => [shapeName(shape), () => setupOf(shape)]));
  const results = await measureInterleaved(setups, options);
  return {
    redis: options.redis,
    cores: options.cores,
    shapes: SCALE_OUT_SHAPES.map((shape) => ({ ...shape, result: results[`${shapeName(shape)}/payment`] })),
  };
}

/** The shape's req/s over the single mesh's (1 gateway × 1 payments), pooled and per start. */
export function againstSingle(result: ScaleOutResult, shape: Shape): { ratio: number; byStart: string } | undefined {
  const single = result.shapes[0]?.result;
  const r = result.shapes.find((s) => s.gateways === shape.gateways && s.payments === shape.payments)?.result;
  if (!single || !r) return undefined;
  return {
    ratio: r.reqPerSec / single.reqPerSec,
    byStart: r.reqPerSecByStart.map((x, i) => (x / single.reqPerSecByStart[i]!).toFixed(2)).join(", "),
  };
}

export function formatScaleOut(result: ScaleOutResult): string[] {
  const out: string[] = [];
  for (const shape of result.shapes) {
    const r = shape.result;
    if (!r) {
      out.push(`  ${shapeName(shape)}: not measured`);
      continue;
    }
    const vs = againstSingle(result, shape);
    const by = r.cpuMsPerRequestBy ?? {};
    // A process's share of one core while loaded: its CPU per request × the requests per second.
    const busiest = Object.entries(by).sort((a, b) => b[1] - a[1])[0];
    const cpu = Object.entries(by)
      .filter(([, ms]) => ms >= 0.02)
      .map(([name, ms]) => `${name} ${ms.toFixed(3)}`)
      .join(", ");
    out.push(
      `  ${shapeName(shape).padEnd(26)} ${r.reqPerSec.toFixed(0).padStart(6)} req/s, ${vs ? `${vs.ratio.toFixed(2)}× one of each (starts ${vs.byStart})` : ""}; CPU ms per request: ${cpu} (all ${(r.serverCpuMsPerRequest ?? 0).toFixed(3)}); busiest: ${busiest ? `${busiest[0]} at ${((busiest[1] * r.reqPerSec) / 10).toFixed(0)} % of a core` : "?"}; other work ${r.otherCpuPct?.toFixed(0) ?? "?"} % of the machine`,
    );
  }
  out.push(
    `  What ${result.cores} cores can show: whether one process was the limit — a second gateway or payments process only helps when the first kept its core busy while the machine had CPU to spare — and what the extra processes cost per request. They cannot show a cluster scaling: every replica here shares these ${result.cores} cores with the rest of the mesh, the load generator and the PostgreSQL server, so replicas add processes, not capacity. Size a cluster from the CPU per request above (per process, per core), not from these req/s.`,
  );
  return out;
}
