// The API pipeline composed (pipeline/api.ts) over a real HTTP server, the real documents and fake
// route handlers: the order of its refusals, what a shed or refused request draws, what teaches the
// concurrency limit its latency, live streams' slots and places, and a client that leaves.
import { expect } from "chai";
import { once } from "node:events";
import { Code, ConnectError } from "@connectrpc/connect";
import { fail } from "@switchyard/platform/errors.js";
import { createLogger } from "@switchyard/platform/logger.js";
import type { Caller } from "@switchyard/platform/caller.js";
import type { AdaptiveConcurrencyLimit } from "../../src/runtime/concurrency-limit.js";
import { FailureLog } from "../../src/runtime/failure-log.js";
import { observeRequest } from "../../src/runtime/observability.js";
import { createRateLimiter, type RateLimiter } from "../../src/runtime/rate-limit.js";
import type { RouteContext, RouteHandler } from "../../src/runtime/route.js";
import { DeprecatedRouteUsage } from "../../src/runtime/versions.js";
import type { BoundRoute } from "../../src/routes/table.js";
import { caller, fakeVerifier } from "./fixtures.js";
import { listening, placesBack, sampledLimit, testApiPipeline, testPolicy } from "./composed.js";

const QUOTA = 6;
const ALICE = "Bearer t-alice";

describe("pipeline: the API's stages composed", () => {
  const logger = createLogger("test", "silent");
  const alice = caller("acme", 7n, "t-alice");
  const { verifier } = fakeVerifier({ [ALICE]: alice });
  let server: Awaited<ReturnType<typeof listening>>;
  let rateLimiter: RateLimiter;
  let concurrency: AdaptiveConcurrencyLimit;
  let failures: FailureLog;
  let usage: DeprecatedRouteUsage;
  /** What each released place said: did its latency teach the limit. */
  let samples: boolean[];
  let sheds: number;
  /** What the handlers of the routes below saw and do. */
  let seen: RouteContext[];
  let answer: RouteHandler;

  const route = (handler: RouteHandler): BoundRoute => ({
    upstream: "payments",
    handler: (ctx) => (seen.push(ctx), handler(ctx)),
  });
  const routes = new Map<string, BoundRoute>([
    ["getPayment", route((ctx) => answer(ctx))],
    ["listCatalogItems", route(async () => ({ status: 200, body: { items: [] } }))],
    ["listPosts", route(async (ctx) => ({ status: 200, events: liveEvents(ctx) }))],
    ["cancelOrder", route(async () => ({ status: 200, body: {} }))],
  ]);

  async function* liveEvents(ctx: RouteContext) {
    yield { id: "1", data: { hello: "world" } };
    const signal = ctx.streamCallOptions().signal!;
    if (!signal.aborted) await once(signal, "abort");
  }

  beforeEach(async () => {
    samples = [];
    sheds = 0;
    seen = [];
    answer = async () => ({ status: 200, body: { id: "pay_1" } });
    rateLimiter = createRateLimiter({
      limit: QUOTA,
      windowSeconds: 600,
      keyPrefix: `api-test-${process.pid}-${Math.random()}`,
    });
    // A fixed limit of one request at a time, whose places report what they teach.
    concurrency = sampledLimit(1, (sample) => samples.push(sample));
    failures = new FailureLog(logger);
    usage = new DeprecatedRouteUsage(logger, 60_000);
    server = await serving();
  });

  /** The pipeline over the test parts, listening; `priorities: false` as GATEWAY_PRIORITIES=false. */
  async function serving(priorities?: boolean) {
    const policy = testPolicy({
      verifier,
      concurrency,
      rateLimiter,
      rateLimit: QUOTA,
      onShed: () => sheds++,
      ...(priorities === undefined ? {} : { priorities }),
    });
    const serveApi = testApiPipeline({ policy, verifier, routes, failures, usage });
    return listening((req, res) => {
      const record = observeRequest(req, res, { trustedProxyHops: 0, logger, accessLog: false });
      const [pathname = "", search = ""] = (req.url ?? "/").split("?");
      void serveApi({
        req,
        res,
        record,
        headers: { "x-request-id": record.requestId },
        address: "192.0.2.9",
        pathname,
        search,
      });
    });
  }
  afterEach(async () => {
    await server.close();
    await rateLimiter.close();
    failures.stop();
    usage.stop();
  });

  const get = (path: string, headers: Record<string, string> = {}) => fetch(`${server.base}${path}`, { headers });
  const remaining = (res: Response) => Number(res.headers.get("x-ratelimit-remaining"));
  const code = async (res: Response) => ((await res.json()) as { code: string }).code;
  const settled = () => placesBack(concurrency);

  it("answers a routed request with its representation, the request id, Vary and the quota; its latency teaches the limit", async () => {
    const res = await get("/v1/payments/pay_1", { authorization: ALICE });
    expect(res.status).to.equal(200);
    expect(await res.json()).to.deep.equal({ id: "pay_1" });
    expect(res.headers.get("x-request-id")).to.be.a("string");
    expect(res.headers.get("vary")).to.equal("Accept");
    expect(remaining(res)).to.equal(QUOTA - 1);
    await settled();
    expect(samples).to.deep.equal([true]);
    expect(seen[0]?.caller).to.equal(alice);
  });

  it("teaches the limit nothing from an answer out of the edge cache's memory, or a failure upstream (5xx)", async () => {
    answer = async (ctx) => (ctx.cacheResult("hit"), { status: 200, body: {} });
    expect((await get("/v1/payments/pay_1", { authorization: ALICE })).status).to.equal(200);
    await settled();
    answer = () => Promise.reject(new ConnectError("down", Code.Unavailable));
    expect((await get("/v1/payments/pay_1", { authorization: ALICE })).status).to.equal(502);
    await settled();
    answer = () => Promise.reject(fail("NOT_FOUND", "no such payment"));
    expect(
      (await get("/v1/payments/pay_1", { authorization: ALICE })).status,
      "a refusal upstream did the work",
    ).to.equal(404);
    await settled();
    expect(samples).to.deep.equal([false, false, true]);
  });

  it("draws on the quota for a refused route, and answers 429 before the 404 once it is spent", async () => {
    const first = await get("/v1/no-such-route");
    expect(first.status).to.equal(404);
    expect(remaining(first)).to.equal(QUOTA - 1);
    for (let i = 1; i < QUOTA; i++) await get("/v1/no-such-route");
    const refused = await get("/v1/no-such-route");
    expect(refused.status).to.equal(429);
    expect(await code(refused)).to.equal("RATE_LIMITED");
    expect(refused.headers.get("retry-after")).to.match(/^\d+$/);
    expect(samples, "no place was taken").to.deep.equal([]);
  });

  it("sheds beyond the limit with 503 at once, drawing nothing and carrying the quota as it stands", async () => {
    await get("/v1/payments/pay_1", { authorization: ALICE });
    await settled();
    const held = concurrency.tryAcquire()!;
    try {
      for (let i = 0; i < 2; i++) {
        const shed = await get("/v1/payments/pay_1", { authorization: ALICE });
        expect(shed.status).to.equal(503);
        expect(await code(shed)).to.equal("LOAD_SHED");
        expect(shed.headers.get("retry-after")).to.equal("1");
        expect(remaining(shed), "nothing drawn").to.equal(QUOTA - 1);
      }
    } finally {
      held(false);
    }
    expect(sheds).to.equal(2);
    expect(seen.length, "no work was done for a shed request").to.equal(1);
  });

  it("answers a shed request past its quota with 429, not 503", async () => {
    for (let i = 0; i < QUOTA; i++) await get("/v1/payments/pay_1", { authorization: ALICE });
    await settled();
    const held = concurrency.tryAcquire()!;
    try {
      const refused = await get("/v1/payments/pay_1", { authorization: ALICE });
      expect(refused.status).to.equal(429);
    } finally {
      held(false);
    }
    expect(sheds).to.equal(0);
  });

  it("refuses a route that needs a user without a token (401) — after checking the input (400 first)", async () => {
    const bare = await get("/v1/payments/pay_1");
    expect(bare.status).to.equal(401);
    expect(bare.headers.get("www-authenticate")).to.equal('Bearer realm="switchyard"');
    const bad = await get("/v1/payments/pay_1", { authorization: "Bearer made-up" });
    expect(bad.status).to.equal(401);
    expect(bad.headers.get("www-authenticate")).to.equal('Bearer realm="switchyard", error="invalid_token"');
    expect(remaining(bad), "an invalid token draws on the address's quota").to.equal(QUOTA - 2);
    const timeout = await get("/v1/payments/pay_1", { "x-request-timeout-ms": "soon" });
    expect(timeout.status).to.equal(400);
    await settled();
    expect(samples, "refused before any upstream work").to.deep.equal([false, false, false]);
  });

  it("serves a public route to a request with an invalid token as anonymous, passing no caller on", async () => {
    const res = await get("/v1/catalog/items", { authorization: "Bearer made-up" });
    expect(res.status).to.equal(200);
    expect(seen[0]?.caller).to.equal(undefined);
  });

  it("sends each call the route's priority — a later page and a live stream sheddable — never the client's own", async () => {
    const sent = async (path: string, init: RequestInit = {}) => {
      seen = [];
      const res = await fetch(`${server.base}${path}`, {
        ...init,
        headers: { authorization: ALICE, "x-switchyard-priority": "critical", ...init.headers },
      });
      await res.body?.cancel();
      await settled();
      return (seen[0]?.callOptions().headers as Record<string, string> | undefined)?.["x-switchyard-priority"];
    };
    expect(await sent("/v1/payments/pay_1"), "default: nothing sent").to.equal(undefined);
    expect(await sent("/v1/catalog/items")).to.equal("sheddable");
    expect(await sent("/v1/posts?cursor=abc")).to.equal("sheddable");
    expect(await sent("/v1/posts"), "a first page is default").to.equal(undefined);
    expect(await sent("/v1/orders/1/cancel", { method: "POST" })).to.equal("critical");
  });

  it("with priorities off (GATEWAY_PRIORITIES=false) sends every call as default, a critical route's too", async () => {
    await server.close();
    server = await serving(false);
    for (const [path, method] of [
      ["/v1/orders/1/cancel", "POST"],
      ["/v1/catalog/items", "GET"],
    ] as const) {
      seen = [];
      const res = await fetch(`${server.base}${path}`, { method, headers: { authorization: ALICE } });
      await res.body?.cancel();
      await settled();
      expect(seen, path).to.have.length(1);
      const headers = seen[0]!.callOptions().headers as Record<string, string> | undefined;
      expect(headers?.["x-switchyard-priority"], path).to.equal(undefined);
    }
  });

  it("answers the OpenAPI document itself, drawing on the quota without taking a place", async () => {
    const res = await get("/v1/openapi.json");
    expect(res.status).to.equal(200);
    expect(((await res.json()) as { openapi: string }).openapi).to.match(/^3\./);
    expect(remaining(res)).to.equal(QUOTA - 1);
    expect(samples).to.deep.equal([]);
  });

  it("gives a live stream's place back once open, holds its caller's slot while it lasts, and refuses one more (429)", async () => {
    const first = new AbortController();
    const stream = await fetch(`${server.base}/v1/posts`, {
      headers: { authorization: ALICE, accept: "text/event-stream" },
      signal: first.signal,
    });
    expect(stream.headers.get("content-type")).to.equal("text/event-stream; charset=utf-8");
    const reader = stream.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).to.include('data: {"hello":"world"}');
    expect(concurrency.inflight, "the open stream holds no place").to.equal(0);
    expect(samples).to.deep.equal([false]);
    const second = await get("/v1/posts", { authorization: ALICE, accept: "text/event-stream" });
    expect(second.status).to.equal(429);
    expect(await code(second)).to.equal("TOO_MANY_STREAMS");
    expect(second.headers.get("retry-after")).to.equal("5");
    first.abort();
    await reader.cancel().catch(() => {});
    for (let i = 0; i < 50; i++) {
      const again = await get("/v1/posts", { authorization: ALICE, accept: "text/event-stream" });
      if (again.status === 200) return void (await again.body?.cancel());
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error("the slot never came back");
  });

  it("cancels the upstream call when the client leaves mid-request, and gives its place back", async () => {
    let cancelled: () => void = () => {};
    const wasCancelled = new Promise<void>((resolve) => (cancelled = resolve));
    answer = (ctx) =>
      new Promise((_, reject) => {
        const { signal } = ctx.callOptions();
        signal!.addEventListener("abort", () => (cancelled(), reject(new ConnectError("cancelled", Code.Canceled))));
      });
    const client = new AbortController();
    const pending = fetch(`${server.base}/v1/payments/pay_1`, {
      headers: { authorization: ALICE },
      signal: client.signal,
    }).catch(() => undefined);
    while (seen.length === 0) await new Promise((r) => setTimeout(r, 5));
    client.abort();
    await pending;
    await wasCancelled;
    await settled();
    expect(concurrency.inflight).to.equal(0);
    expect(samples.length).to.equal(1);
  });

  it("passes the caller, its checked input and deadline to the handler", async () => {
    await get("/v1/payments/pay_1", { authorization: ALICE, "x-request-timeout-ms": "60000" });
    const ctx = seen[0]!;
    expect(ctx.params).to.deep.equal({ payment_id: "pay_1" });
    expect((ctx.caller as Caller).userId).to.equal(7n);
    expect(ctx.callOptions().timeoutMs, "capped at the maximum").to.be.within(1_000, 2_000);
  });
});
