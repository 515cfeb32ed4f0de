// `npm run bench`: (A) the gRPC library choice reproduced on unary Echo, (B) the HTTP ceiling,
// the bare gRPC hop and the real read and write paths through the mesh. Prints the report,
// writes .bench/results-<timestamp>.json, and exits non-zero if any scenario could not run.
import { randomUUID } from "node:crypto";
import { echoClient, type ClientKind } from "./echo-clients.js";
import { measureCalls } from "./load/grpc-load.js";
import { measureHttp } from "./load/http-load.js";
import { PAYMENT_BODY, startMeshFixture, type MeshFixture } from "./mesh-fixture.js";
import { killAll, startServer, type ServerProcess } from "./processes.js";
import { printReport, writeResults, type HttpOutcome, type LibraryOutcome, type Outcome, type Settings } from "./report.js";
import { measureOverload, type OverloadResult } from "./load/overload.js";
import { measureFeedDepth, type FeedDepthResult } from "./feed-depth.js";

/** Extra sections: the documents read path, overload, and feed paging at depth. */
const extra: { overload?: OverloadResult | { error: string }; feedDepth?: FeedDepthResult[] | { error: string } } = {};
const OVERLOAD_FACTOR = 3;

// BENCH_SECONDS / BENCH_WARMUP_SECONDS shorten a run while developing; the defaults are the benchmark.
const settings: Settings = {
  inFlight: 50,
  warmupSeconds: Number(process.env.BENCH_WARMUP_SECONDS ?? 2),
  seconds: Number(process.env.BENCH_SECONDS ?? 8),
};
const load = { concurrency: settings.inFlight, connections: settings.inFlight, seconds: settings.seconds, warmupSeconds: settings.warmupSeconds };

// Everything running right now, so that an error or a signal stops it.
const running = new Set<{ stop(): Promise<void> }>();
async function hold<T extends { stop(): Promise<void> }>(start: Promise<T>): Promise<T> {
  const thing = await start;
  running.add(thing);
  return thing;
}
async function release(...things: ({ stop(): Promise<void> } | undefined)[]): Promise<void> {
  await Promise.allSettled(things.map((t) => t && (running.delete(t), t.stop())));
}
async function stopEverything(): Promise<void> {
  const all = [...running];
  running.clear();
  await Promise.race([Promise.allSettled(all.map((t) => t.stop())), new Promise((r) => setTimeout(r, 20_000).unref())]);
  killAll();
}

let interrupted = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    interrupted = true;
    console.error(`\n${signal}: stopping every benchmark process…`);
    void stopEverything().finally(() => process.exit(130));
  });
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

async function scenario<R>(outcomes: Outcome<R>[], id: string, label: string, run: () => Promise<R>): Promise<void> {
  console.error(`  running ${label} …`);
  try {
    outcomes.push({ id, label, result: await run() });
  } catch (err) {
    if (interrupted) throw err;
    console.error(`  ✗ ${label}: ${message(err)}`);
    outcomes.push({ id, label, error: message(err).split("\n")[0]! });
  }
}

async function libraryChoice(outcomes: LibraryOutcome[]): Promise<void> {
  let grpcjs: ServerProcess | undefined;
  let connect: ServerProcess | undefined;
  try {
    [grpcjs, connect] = await Promise.all([hold(startServer("echo-grpcjs.ts")), hold(startServer("echo-connect.ts"))]);
    const servers = { "grpc-js": grpcjs, connect };
    const cases: [string, ClientKind, keyof typeof servers, string][] = [
      ["grpcjs-grpcjs", "grpc-js", "grpc-js", "grpc-js client (ours) → grpc-js server (startGrpcServer)"],
      ["grpcjs-connect", "grpc-js", "connect", "grpc-js client (ours) → connect-node server (h2c)"],
      ["connect-grpcjs", "connect", "grpc-js", "connect gRPC transport → grpc-js server (startGrpcServer)"],
      ["connect-connect", "connect", "connect", "connect gRPC transport → connect-node server (h2c)"],
    ];
    for (const [id, clientKind, serverKind, label] of cases) {
      await scenario(outcomes, id, label, async () => {
        const client = echoClient(clientKind, servers[serverKind].address);
        try {
          return await measureCalls(client.call, load);
        } finally {
          client.close();
        }
      });
    }
  } catch (err) {
    if (interrupted) throw err;
    outcomes.push({ id: "servers", label: "echo servers", error: message(err) });
  } finally {
    await release(grpcjs, connect);
  }
}

async function httpPaths(outcomes: HttpOutcome[]): Promise<void> {
  await scenario(outcomes, "raw", "1 raw node:http (constant JSON)", async () => {
    const raw = await hold(startServer("raw-http.ts"));
    try {
      return await measureHttp({ url: `http://${raw.address}/` }, load);
    } finally {
      await release(raw);
    }
  });

  await scenario(outcomes, "bare-hop", "2 bare hop (node:http → grpc-js Echo)", async () => {
    let echo: ServerProcess | undefined;
    let hop: ServerProcess | undefined;
    try {
      echo = await hold(startServer("echo-grpcjs.ts"));
      hop = await hold(startServer("bare-hop.ts", { ECHO_ADDRESS: echo.address }));
      return await measureHttp({ url: `http://${hop.address}/` }, { ...load, processes: { "bare-hop": hop.pid, echo: echo.pid } });
    } finally {
      await release(hop, echo);
    }
  });

  let mesh: MeshFixture | undefined;
  try {
    console.error("  starting the mesh (identity, payments, gateway) …");
    mesh = await hold(startMeshFixture());
  } catch (err) {
    if (interrupted) throw err;
    for (const [id, label] of [["read", "3 GET /v1/payments/{id} (mesh)"], ["write", "4 POST /v1/payments (mesh)"]] as const) outcomes.push({ id, label, error: message(err).split("\n")[0]! });
    return;
  }
  try {
    const auth = { authorization: `Bearer ${mesh.token}` };
    const meshLoad = { ...load, processes: mesh.pids };
    await scenario(outcomes, "read", "3 GET /v1/payments/{id} (mesh)", () => measureHttp({ url: `${mesh!.gatewayUrl}/v1/payments/${mesh!.paymentId}`, headers: auth }, meshLoad));
    await scenario(outcomes, "write", "4 POST /v1/payments (mesh)", () =>
      measureHttp(
        {
          url: `${mesh!.gatewayUrl}/v1/payments`,
          method: "POST",
          headers: { ...auth, "content-type": "application/json" },
          body: PAYMENT_BODY,
          perRequestHeaders: () => ({ "idempotency-key": randomUUID() }),
          expectStatus: 201,
        },
        meshLoad,
      ),
    );
    await scenario(outcomes, "docs", "5 GET /v1/docs/{id} (mesh)", () => measureHttp({ url: `${mesh!.gatewayUrl}/v1/docs/${mesh!.docId}`, headers: auth }, meshLoad));
    console.error(`  running overload: GET /v1/payments/{id} with ${OVERLOAD_FACTOR}× the connections …`);
    try {
      extra.overload = await measureOverload(`${mesh.gatewayUrl}/v1/payments/${mesh.paymentId}`, auth, settings.inFlight * OVERLOAD_FACTOR, settings.seconds);
    } catch (err) {
      extra.overload = { error: message(err) };
    }
  } finally {
    await release(mesh);
  }
}

function printExtra(http: HttpOutcome[]): void {
  const out: string[] = [];
  const hop = http.find((o) => o.id === "bare-hop")?.result;
  const docs = http.find((o) => o.id === "docs")?.result;
  const read = http.find((o) => o.id === "read")?.result;
  if (docs && hop) out.push(`  target: GET /v1/docs/{id} ≥ 0.85 × bare hop req/s → ${(docs.reqPerSec / hop.reqPerSec).toFixed(2)} → ${docs.reqPerSec / hop.reqPerSec >= 0.85 ? "PASS" : "MISS"}`);
  out.push("", `C. Overload — GET /v1/payments/{id} with ${settings.inFlight * OVERLOAD_FACTOR} connections (${OVERLOAD_FACTOR}× the measured load)`);
  const o = extra.overload;
  if (!o || "error" in o) out.push(`  FAILED: ${o ? o.error : "not run"}`);
  else {
    out.push(`  admitted ${o.admittedPerSec.toFixed(0)} req/s, p99 ${o.admittedP99Ms.toFixed(1)} ms; shed ${o.shed} (503, ${o.shedWithRetryAfter} with Retry-After), shed p99 ${Number.isNaN(o.shedP99Ms) ? "–" : o.shedP99Ms.toFixed(1)} ms; other statuses ${JSON.stringify(o.other)}`);
    if (read) {
      const ratio = o.admittedP99Ms / read.p99Ms;
      out.push(`  target: admitted p99 ≤ 2 × p99 at ${settings.inFlight} connections (${read.p99Ms.toFixed(1)} ms) → ${ratio.toFixed(2)}× → ${ratio <= 2 ? "PASS" : "MISS"}`);
    }
  }
  out.push("", "D. Feed page cost at depth — 1,000,000 posts, keyset page ~90% deep vs near the top (offset beside it)");
  const f = extra.feedDepth;
  if (!f || "error" in f) out.push(`  FAILED: ${f ? f.error : "not run"}`);
  else
    for (const r of f) {
      out.push(`  ${r.engine}: near top ${r.firstPageMs.toFixed(2)} ms, deep keyset ${r.deepKeysetMs.toFixed(2)} ms (${r.keysetDepthRatio.toFixed(2)}×, target ≤ ${r.target}× → ${r.pass ? "PASS" : "MISS"}), deep offset ${r.deepOffsetMs.toFixed(1)} ms (${r.offsetDepthRatio.toFixed(0)}×, for contrast)`);
    }
  console.log(out.join("\n"));
}

async function main(): Promise<number> {
  const startedAt = new Date();
  const library: LibraryOutcome[] = [];
  const http: HttpOutcome[] = [];
  // BENCH_ONLY=library|http runs one part (while investigating); the default runs both.
  const only = process.env.BENCH_ONLY;
  if (only !== "http") {
    console.error("A. gRPC library choice");
    await libraryChoice(library);
  }
  if (only !== "library") {
    console.error("B. HTTP paths");
    await httpPaths(http);
    console.error("D. feed paging at depth");
    try {
      extra.feedDepth = [await measureFeedDepth({ databaseUrl: undefined })];
      if (process.env.DATABASE_URL) extra.feedDepth.push(await measureFeedDepth({ databaseUrl: process.env.DATABASE_URL }));
    } catch (err) {
      extra.feedDepth = { error: message(err) };
    }
  }
  console.log("");
  printReport(settings, library, http);
  printExtra(http);
  const file = await writeResults(startedAt, settings, library, http, extra);
  console.log(`\nresults written to ${file}`);
  const failed: { label: string }[] = [...library, ...http].filter((o) => o.error);
  if (extra.overload && "error" in extra.overload) failed.push({ label: "overload" });
  if (extra.feedDepth && "error" in extra.feedDepth) failed.push({ label: "feed depth" });
  if (failed.length > 0) console.error(`\n${failed.length} scenario(s) could not run: ${failed.map((o) => o.label).join("; ")}`);
  return failed.length > 0 ? 1 : 0;
}

main().then(
  async (code) => {
    await stopEverything();
    process.exit(code);
  },
  async (err: unknown) => {
    if (interrupted) return;
    console.error(`benchmark failed: ${err instanceof Error ? err.stack : String(err)}`);
    await stopEverything();
    process.exit(1);
  },
);
