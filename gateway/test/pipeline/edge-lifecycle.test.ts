// One edge lifecycle, two fronts: a stage added to the edge's policy once is entered by /v1's and
// /rpc's calls alike (through the real dispatch, the /v<N> pipeline and the browser proxy, over HTTP),
// its refusal said in each front's own protocol; and the one rule for what the concurrency limit
// learns from an answered call holds on both.
import { expect } from "chai";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { fail } from "@switchyard/platform/errors.js";
import { createLogger } from "@switchyard/platform/logger.js";
import { dispatchStage } from "../../src/dispatch.js";
import type { EdgeCall } from "../../src/pipeline/edge-call.js";
import { teachesLimit } from "../../src/pipeline/edge-lifecycle.js";
import { rpcProxy } from "../../src/rpc/front.js";
import type { AdaptiveConcurrencyLimit } from "../../src/runtime/concurrency-limit.js";
import { corsPolicy } from "../../src/runtime/cors.js";
import { edgeError } from "../../src/runtime/errors.js";
import { FailureLog } from "../../src/runtime/failure-log.js";
import { observeRequest } from "../../src/runtime/observability.js";
import { createRateLimiter, type RateLimiter } from "../../src/runtime/rate-limit.js";
import type { RouteHandler } from "../../src/runtime/route.js";
import { DeprecatedRouteUsage, publishedVersions } from "../../src/runtime/versions.js";
import type { BoundRoute } from "../../src/routes/table.js";
import type { Upstreams } from "../../src/upstreams.js";
import { caller, fakeVerifier } from "./fixtures.js";
import { listening, placesBack, sampledLimit, testApiPipeline, testPolicy } from "./composed.js";

const ALICE = "Bearer t-alice";

describe("pipeline: one edge lifecycle for /v1 and /rpc", () => {
  const logger = createLogger("test", "silent");
  const versions = publishedVersions(new Date("2027-08-23T00:00:00Z"));
  const { verifier } = fakeVerifier({ [ALICE]: caller("acme", 7n, "t-alice") });
  let server: Awaited<ReturnType<typeof listening>>;
  let rateLimiter: RateLimiter;
  let concurrency: AdaptiveConcurrencyLimit;
  let failures: FailureLog;
  let usage: DeprecatedRouteUsage;
  /** What the added stage saw: each call it was entered by, holding its place in the limit or not. */
  let entered: { holdsPlace: boolean; quotaKey: string }[];
  /** The added stage's refusal, when it refuses. */
  let closedForMaintenance: boolean;
  /** What each released place said: did its latency teach the limit. */
  let samples: boolean[];
  /** How /v1's route and /rpc's upstream answer. */
  let v1Answer: RouteHandler;
  let rpcAnswer: () => Promise<unknown>;

  const maintenance = edgeError("ROLE_REQUIRED", "closed for maintenance");
  const addedStage = (call: EdgeCall) => {
    entered.push({ holdsPlace: call.release !== undefined, quotaKey: call.quotaKey });
    return closedForMaintenance ? maintenance : undefined;
  };

  beforeEach(async () => {
    entered = [];
    samples = [];
    closedForMaintenance = false;
    v1Answer = async () => ({ status: 200, body: { id: "pay_1" } });
    rpcAnswer = async () => ({ document: { id: "doc_x", title: "t", body: "b", etag: '"e"' } });
    rateLimiter = createRateLimiter({
      limit: 100,
      windowSeconds: 600,
      keyPrefix: `lifecycle-${process.pid}-${Math.random()}`,
    });
    concurrency = sampledLimit(4, (sample) => samples.push(sample));
    failures = new FailureLog(logger);
    usage = new DeprecatedRouteUsage(logger, 60_000);
    // The edge's policy with one stage more, added once.
    const policy = testPolicy({ verifier, concurrency, rateLimiter, rateLimit: 100, stages: [addedStage] });
    const routes = new Map<string, BoundRoute>([
      ["getPayment", { upstream: "payments", handler: (ctx) => v1Answer(ctx) }],
    ]);
    const serveApi = testApiPipeline({ policy, verifier, routes, failures, usage });
    const content = { getDocument: () => rpcAnswer() };
    const rpc = rpcProxy({
      upstreams: { identity: {}, payments: {}, orders: {}, content } as unknown as Upstreams,
      policy,
      maxBodyBytes: 64 * 1024,
    });
    const dispatch = dispatchStage({
      versions,
      docs: { handles: () => false, serve: () => {} },
      cors: corsPolicy([]),
      rpc,
      serveApi,
      answerReadiness: async () => {},
      trustedProxyHops: 0,
    });
    server = await listening((req, res) => {
      const record = observeRequest(req, res, { trustedProxyHops: 0, logger, accessLog: false });
      void dispatch(req, res, record, { "x-request-id": record.requestId });
    });
  });
  afterEach(async () => {
    await server.close();
    await rateLimiter.close();
    failures.stop();
    usage.stop();
  });

  const v1 = () => fetch(`${server.base}/v1/payments/pay_1`, { headers: { authorization: ALICE } });
  const content = () =>
    createClient(ContentService, createConnectTransport({ baseUrl: `${server.base}/rpc`, httpVersion: "1.1" }));
  const getDocument = () => content().getDocument({ documentId: "doc_x" }, { headers: { authorization: ALICE } });
  const settled = () => placesBack(concurrency);
  async function refusalOf(call: () => Promise<unknown>): Promise<ConnectError> {
    try {
      await call();
    } catch (err) {
      return ConnectError.from(err);
    }
    throw new Error("the call was not refused");
  }

  it("runs a stage added once for a /v1 request and an /rpc call, each admitted first", async () => {
    expect((await v1()).status).to.equal(200);
    expect(entered).to.deep.equal([{ holdsPlace: true, quotaKey: "user:acme:7" }]);
    expect((await getDocument()).document?.id).to.equal("doc_x");
    expect(entered).to.deep.equal([
      { holdsPlace: true, quotaKey: "user:acme:7" },
      { holdsPlace: true, quotaKey: "user:acme:7" },
    ]);
  });

  it("says the added stage's refusal in each front's protocol, the place given back and no work done", async () => {
    closedForMaintenance = true;
    let upstreamCalls = 0;
    v1Answer = async () => (upstreamCalls++, { status: 200, body: {} });
    rpcAnswer = async () => (upstreamCalls++, {});
    const refused = await v1();
    expect(refused.status).to.equal(403);
    expect(await refused.json()).to.deep.include({ code: "ROLE_REQUIRED", error: "closed for maintenance" });
    expect(refused.headers.get("x-ratelimit-remaining"), "the quota drawn, as any answer").to.match(/^\d+$/);
    const rpcRefused = await refusalOf(getDocument);
    expect(rpcRefused.code).to.equal(Code.PermissionDenied);
    expect(rpcRefused.rawMessage).to.equal("closed for maintenance");
    await settled();
    expect(concurrency.inflight).to.equal(0);
    expect(samples, "refused before any work: nothing learned").to.deep.equal([false, false]);
    expect(upstreamCalls).to.equal(0);
  });

  it("teaches the limit by one rule on both fronts: an answer of upstream work below 500, not a failure of the mesh", async () => {
    await v1();
    await getDocument();
    await settled();
    expect(samples, "both answered by the upstream").to.deep.equal([true, true]);

    samples = [];
    v1Answer = () => Promise.reject(fail("NOT_FOUND", "no such payment"));
    rpcAnswer = () => Promise.reject(fail("NOT_FOUND", "no such document"));
    expect((await v1()).status).to.equal(404);
    expect((await refusalOf(getDocument)).code).to.equal(Code.NotFound);
    await settled();
    expect(samples, "a refusal upstream did the work").to.deep.equal([true, true]);

    samples = [];
    v1Answer = () => Promise.reject(new ConnectError("deadline", Code.DeadlineExceeded));
    rpcAnswer = () => Promise.reject(new ConnectError("deadline", Code.DeadlineExceeded));
    expect((await v1()).status).to.equal(504);
    expect((await refusalOf(getDocument)).code).to.equal(Code.DeadlineExceeded);
    await settled();
    expect(samples, "a deadline cut short says nothing of latency, on either front").to.deep.equal([false, false]);
  });

  it("states the rule: upstream work, below 500", () => {
    expect(teachesLimit({ upstreamWork: true, status: 200 })).to.equal(true);
    expect(teachesLimit({ upstreamWork: true, status: 409 })).to.equal(true);
    expect(teachesLimit({ upstreamWork: true, status: 502 })).to.equal(false);
    expect(teachesLimit({ upstreamWork: false, status: 200 }), "the edge cache's memory").to.equal(false);
  });
});
