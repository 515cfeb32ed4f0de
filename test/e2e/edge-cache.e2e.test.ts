// End to end through the real mesh: the gateways' edge cache of the catalog and documents is coherent
// with writes. Two gateways: writes through the first, a tight loop of reads through the second (and
// the cache demonstrably answering them), the second slow to apply changes; no read that starts after
// a write's answer sees what was there before it. With DATABASE_URL, two content replicas share the server database as deployed (the
// change stream, the renewals and the writes each land on either). A gateway whose change stream is
// cut (content stopped) serves nothing from memory until it has resubscribed, and content killed and
// restarted under reads leaves no stale read behind.
import { expect } from "chai";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { randomBytes } from "node:crypto";
import { ALICE, Api, newKey, startE2eMesh, unique, untilReachable, type E2eMesh } from "../support/http.js";

const LEASE_MS = 1_000;
/**
 * The reading gateway applies each change this late (a test fault point): a slow cache, which every
 * write must wait for. Without the wait, its reads after a write's answer would be stale this long.
 */
const SLOW_APPLY_MS = 150;

interface Read {
  startedAt: number;
  /** The version the read saw (-1: not a 200). */
  seen: number;
  status: number;
}

/** The cache's answers by result, summed over routes, from a gateway's /metrics. */
async function cacheCounts(baseUrl: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const counts: Record<string, number> = { hit: 0, miss: 0, bypass: 0 };
  for (const m of text.matchAll(/^switchyard_gateway_cache_total\{(.*)\} (\S+)$/gm)) {
    const result = /result="(\w+)"/.exec(m[1]!)?.[1];
    if (result) counts[result] = (counts[result] ?? 0) + Number(m[2]);
  }
  return counts;
}

/** Reads in a tight loop (several at once) until `stop`, each noted with when it started and what it saw. */
function readLoop(
  read: () => Promise<{ status: number; seen: number }>,
  concurrency = 4,
): { reads: Read[]; stop: () => Promise<void> } {
  const reads: Read[] = [];
  let stopped = false;
  const loops = Array.from({ length: concurrency }, async () => {
    while (!stopped) {
      const startedAt = performance.now();
      try {
        const { status, seen } = await read();
        reads.push({ startedAt, status, seen });
      } catch {
        reads.push({ startedAt, status: 0, seen: -1 });
      }
    }
  });
  return {
    reads,
    stop: async () => {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

/** Reads that started after write i had answered yet saw a version before i. */
function staleReads(reads: Read[], answeredAt: number[]): string[] {
  const stale: string[] = [];
  for (const r of reads) {
    if (r.status !== 200) continue;
    let latest = -1;
    answeredAt.forEach((at, version) => {
      if (at <= r.startedAt) latest = version;
    });
    if (r.seen < latest)
      stale.push(
        `a read started ${(r.startedAt - answeredAt[latest]!).toFixed(1)} ms after write ${latest} answered saw version ${r.seen}`,
      );
  }
  return stale;
}

describe("edge cache: coherent reads of the catalog and documents across gateways (e2e)", function () {
  this.timeout(180_000);
  const databaseUrl = process.env.DATABASE_URL;
  const schema = `content_edge_${randomBytes(4).toString("hex")}`;
  let env: E2eMesh;
  let a: Api;
  let b: Api;
  let bUrl: string;
  let token: string;

  before(async function () {
    if (!databaseUrl)
      console.log(
        "      (two content replicas on one server database skipped: DATABASE_URL is not set; one content process on embedded storage)",
      );
    const contentOnServer = databaseUrl
      ? { DATABASE_URL: databaseUrl, CONTENT_DB_SCHEMA: schema, DEMO_DATA_FORCE: "true" }
      : {};
    env = await startE2eMesh("edge-cache", {
      replicas: { gateway: 2, ...(databaseUrl ? { content: 2 } : {}) },
      envFor: { content: { CONTENT_CACHE_LEASE_MS: String(LEASE_MS), ...contentOnServer } },
      envForReplica: { gateway: [{}, { NODE_ENV: "test", FAULTS: `gateway.hold-cache-change=1:${SLOW_APPLY_MS}` }] },
      metrics: true,
    });
    const [portA, portB] = env.mesh.replicaPorts.gateway;
    a = new Api(`http://127.0.0.1:${portA}`);
    bUrl = `http://127.0.0.1:${portB}`;
    b = new Api(bUrl);
    token = await a.login(ALICE);
  });
  after(async () => {
    await env?.stop();
    if (databaseUrl) {
      const admin = new pg.Client(databaseUrl);
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await admin.end();
    }
  });

  /** Waits until gateway `api` answers `path` from memory (it has subscribed and holds a lease). */
  async function untilCached(api: Api, path: string, withToken?: string): Promise<void> {
    for (const until = Date.now() + 20_000; Date.now() < until; await sleep(50)) {
      const before = (await cacheCounts(api.baseUrl)).hit!;
      await api.get(path, withToken ? { token: withToken } : {});
      if ((await cacheCounts(api.baseUrl)).hit! > before) return;
    }
    throw new Error(`${api.baseUrl} never answered ${path} from memory`);
  }

  it("answers a document and its 304 from memory, with the edge's own headers, to its tenant only", async () => {
    const created = await a.post("/v1/docs", { token, json: { title: "edge", body: "v0" } });
    expect(created.status, created.text).to.equal(201);
    const path = `/v1/docs/${created.json.id}`;
    await untilCached(b, path, token);
    const hit = await b.get(path, { token });
    expect(hit.status).to.equal(200);
    expect(hit.json.body).to.equal("v0");
    expect(hit.headers.get("etag")).to.equal(created.headers.get("etag"));
    expect(hit.headers.get("x-ratelimit-limit"), "the quota's headers on a hit").to.be.a("string");
    expect(hit.headers.get("x-request-id")).to.be.a("string");
    const before = await cacheCounts(bUrl);
    const notModified = await b.get(path, { token, headers: { "if-none-match": created.headers.get("etag")! } });
    expect(notModified.status).to.equal(304);
    expect((await cacheCounts(bUrl)).hit).to.equal(before.hit! + 1);
    // v2 is its own representation, kept apart (same body fields here, its own media type).
    const v2 = await b.get(path, { token, headers: { accept: "application/vnd.api.v2+json" } });
    expect(v2.status).to.equal(200);
    expect(v2.headers.get("content-type")).to.match(/vnd\.api\.v2\+json/);
    // Another tenant's token: never the cached document (content's rule, at the edge too).
    const carol = await a.login({ tenant: "globex", email: "carol@globex.test" });
    const foreign = await b.get(path, { token: carol });
    expect(foreign.status).to.equal(404);
  });

  it("never answers a document read through one gateway with a version older than a PUT already answered through the other", async () => {
    const created = await a.post("/v1/docs", { token, json: { title: "race", body: "0" } });
    const path = `/v1/docs/${created.json.id}`;
    await untilCached(b, path, token);
    const hitsBefore = (await cacheCounts(bUrl)).hit!;
    const loop = readLoop(async () => {
      const res = await b.get(path, { token });
      return { status: res.status, seen: res.status === 200 ? Number(res.json.body) : -1 };
    });
    const answeredAt: number[] = [0];
    for (let version = 1; version <= 25; version++) {
      const res = await a.request("PUT", path, { token, json: { title: "race", body: String(version) } });
      expect(res.status, res.text).to.equal(200);
      answeredAt[version] = performance.now();
      await sleep(20);
    }
    await sleep(100);
    await loop.stop();
    const hits = (await cacheCounts(bUrl)).hit! - hitsBefore;
    expect(loop.reads.filter((r) => r.status === 200).length, "reads answered").to.be.above(100);
    expect(hits, "reads the cache answered from memory during the writes").to.be.above(50);
    expect(staleReads(loop.reads, answeredAt)).to.deep.equal([]);
    expect(loop.reads.at(-1)!.seen).to.equal(25);
  });

  it("never answers a catalog page through one gateway from before an import job seen succeeded through the other", async () => {
    const sku = `EDGE-${unique()}`;
    const page = "/v1/catalog/items?page=1&page_size=100";
    const priceIn = (json: { items: { sku: string; price: number }[] }) =>
      json.items.find((i) => i.sku === sku)?.price ?? 0;
    await untilCached(b, page);
    const hitsBefore = (await cacheCounts(bUrl)).hit!;
    const loop = readLoop(async () => {
      const res = await b.get(page);
      return { status: res.status, seen: res.status === 200 ? priceIn(res.json) : -1 };
    });
    // Price = version: each import raises it by one.
    const answeredAt: number[] = [0];
    for (let version = 1; version <= 6; version++) {
      const res = await a.post("/v1/catalog/imports", {
        token,
        key: newKey(),
        json: [{ sku, name: "Edge", price: version, currency: "EUR" }],
      });
      expect(res.status, res.text).to.equal(202);
      const location = res.headers.get("location")!;
      for (;;) {
        const job = await a.get(location, { token });
        if (job.json.status === "succeeded") break;
        expect(job.json.status, job.text).to.be.oneOf(["queued", "running"]);
        await sleep(10);
      }
      answeredAt[version] = performance.now();
    }
    await sleep(100);
    await loop.stop();
    expect((await cacheCounts(bUrl)).hit! - hitsBefore, "pages answered from memory").to.be.above(20);
    expect(staleReads(loop.reads, answeredAt)).to.deep.equal([]);
    expect(loop.reads.at(-1)!.seen).to.equal(6);
  });

  it("serves nothing from memory once content is gone, and nothing stale after content restarted", async () => {
    const created = await a.post("/v1/docs", { token, json: { title: "restart", body: "0" } });
    const path = `/v1/docs/${created.json.id}`;
    await untilCached(b, path, token);
    // A read to a content with no replica waits for one until its deadline (wait-for-ready): short
    // here, so that reads started while content is down have answered before they are counted.
    const loop = readLoop(async () => {
      const res = await b.get(path, { token, headers: { "x-request-timeout-ms": "400" } });
      return { status: res.status, seen: res.status === 200 ? Number(res.json.body) : -1 };
    }, 2);
    const replicas = env.mesh.replicaPorts.content.length;
    // Every content replica stopped: the stream is cut.
    for (let r = 0; r < replicas; r++) await env.mesh.stopService("content", "SIGKILL", r);
    const cutAt = performance.now();
    await sleep(300);
    const hitsWhileDown = (await cacheCounts(bUrl)).hit!;
    await sleep(LEASE_MS);
    expect((await cacheCounts(bUrl)).hit, "answers from memory with content gone").to.equal(hitsWhileDown);
    const down = loop.reads.filter((r) => r.startedAt > cutAt + 300);
    expect(down.length, "reads while content was down").to.be.above(0);
    expect(
      down.filter((r) => r.status === 200),
      "a cached 200 while content was down",
    ).to.deep.equal([]);
    for (let r = 0; r < replicas; r++) await env.mesh.restartService("content", r);
    // A write as soon as gateway A reaches content again, through it: gateway B may not have
    // resubscribed yet; whatever it answers after this write's answer must be new.
    await untilReachable(() => a.get(path, { token }));
    const res = await a.request("PUT", path, { token, json: { title: "restart", body: "1" } });
    expect(res.status, res.text).to.equal(200);
    const answeredAt = [0, performance.now()];
    await untilCached(b, path, token);
    await sleep(200);
    await loop.stop();
    expect(staleReads(loop.reads, answeredAt)).to.deep.equal([]);
    expect(loop.reads.at(-1)!.seen).to.equal(1);
  });

  it("reads through upstream alone with GATEWAY_EDGE_CACHE=false", async function () {
    const off = await startE2eMesh("edge-cache-off", { env: { GATEWAY_EDGE_CACHE: "false" } });
    try {
      await off.api.get("/v1/catalog/items");
      await off.api.get("/v1/catalog/items");
      expect(await cacheCounts(off.mesh.gatewayUrl)).to.deep.equal({ hit: 0, miss: 0, bypass: 0 });
    } finally {
      await off.stop();
    }
  });
});
