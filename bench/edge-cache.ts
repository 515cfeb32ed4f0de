// Issue 34 part 4: GET /v1/catalog/items answered from the gateway's edge cache, against raw node:http
// (bench/servers/raw-http.ts, the HTTP ceiling of this machine) in the same run. Before the cache it
// was 0.030 of raw (every read went to content and its database); grpc-gateway transcodes at ~0.12
// of raw Go, and a cache should beat that twice over: the target is ≥ 0.25.
import { measureHttp, type HttpLoadOptions, type HttpLoadResult } from "./load/http-load.js";
import { startMeshFixture } from "./mesh-fixture.js";
import { startServer } from "./processes.js";
import type { SummaryRow } from "./summary.js";

export const EDGE_CATALOG_TARGET = 0.25;
const CATALOG_PAGE = "/v1/catalog/items?page=1&page_size=20";

export interface EdgeCatalogResult {
  raw: HttpLoadResult;
  catalog: HttpLoadResult;
  /** The catalog's req/s ÷ raw's. */
  ratio: number;
  /** Share of the measured catalog reads answered from memory (the gateway's switchyard_gateway_cache_total). */
  hitShare: number;
}

/** The edge cache's reads by result, from the gateway's /metrics. */
async function cacheCounts(gatewayUrl: string): Promise<{ hit: number; all: number }> {
  const text = await (await fetch(`${gatewayUrl}/metrics`)).text();
  let hit = 0;
  let all = 0;
  for (const m of text.matchAll(/^switchyard_gateway_cache_total\{(.*)\} (\S+)$/gm)) {
    all += Number(m[2]);
    if (m[1]!.includes('result="hit"')) hit += Number(m[2]);
  }
  return { hit, all };
}

export async function measureEdgeCatalog(load: HttpLoadOptions): Promise<EdgeCatalogResult> {
  const rawServer = await startServer("raw-http.ts");
  let raw: HttpLoadResult;
  try {
    raw = await measureHttp({ url: `http://${rawServer.address}/` }, load);
  } finally {
    await rawServer.stop();
  }
  const mesh = await startMeshFixture({ limit: "none" });
  try {
    // Until the gateway holds its lease and the page (a hit), so the measured run reads from memory.
    for (const until = Date.now() + 30_000; ;) {
      const before = await cacheCounts(mesh.gatewayUrl);
      await fetch(`${mesh.gatewayUrl}${CATALOG_PAGE}`).then((r) => r.arrayBuffer());
      if ((await cacheCounts(mesh.gatewayUrl)).hit > before.hit) break;
      if (Date.now() > until) throw new Error("the gateway never answered the catalog from its edge cache");
      await new Promise((r) => setTimeout(r, 100));
    }
    const before = await cacheCounts(mesh.gatewayUrl);
    const catalog = await measureHttp({ url: `${mesh.gatewayUrl}${CATALOG_PAGE}` }, { ...load, processes: mesh.pids });
    const after = await cacheCounts(mesh.gatewayUrl);
    return {
      raw,
      catalog,
      ratio: catalog.reqPerSec / raw.reqPerSec,
      hitShare: (after.hit - before.hit) / Math.max(1, after.all - before.all),
    };
  } finally {
    await mesh.stop();
  }
}

export function formatEdgeCatalog(r: EdgeCatalogResult | { error: string } | undefined): string[] {
  const out = ["", "I. GET /v1/catalog/items from the gateway's edge cache against raw node:http, one run"];
  if (!r) return [...out, "  not run this time (BENCH_ONLY)"];
  if ("error" in r) return [...out, `  FAILED: ${r.error}`];
  // Others' CPU meanwhile: a ratio of two runs is only as good as the quiet of the machine during both.
  const others = (h: HttpLoadResult) =>
    h.otherCpuPct === undefined ? "" : `  (others' CPU ${h.otherCpuPct.toFixed(0)} %)`;
  const line = (name: string, h: HttpLoadResult) =>
    `  ${name.padEnd(28)} ${h.reqPerSec.toFixed(0).padStart(7)} req/s  p50 ${h.p50Ms.toFixed(2)} ms  p99 ${h.p99Ms.toFixed(2)} ms${others(h)}`;
  return [
    ...out,
    line("raw node:http", r.raw),
    line("catalog page (edge cache)", r.catalog),
    `  ${(100 * r.hitShare).toFixed(1)} % of the catalog reads answered from memory; ratio ${r.ratio.toFixed(3)} (target ≥ ${EDGE_CATALOG_TARGET} → ${r.ratio >= EDGE_CATALOG_TARGET ? "PASS" : "MISS"}; 0.030 before the cache)`,
  ];
}

export function edgeCatalogSummaryRow(r: EdgeCatalogResult | { error: string } | undefined): SummaryRow {
  const ok = r && !("error" in r) ? r : undefined;
  return {
    issue: "#34",
    figure: "GET /v1/catalog/items (edge cache) ÷ raw node:http",
    value: ok?.ratio.toFixed(3),
    target: `≥ ${EDGE_CATALOG_TARGET}`,
    pass: ok !== undefined && ok.ratio >= EDGE_CATALOG_TARGET,
  };
}
