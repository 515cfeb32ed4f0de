// Stage cancellation and call: the route's handler gets the checked input, call options with the
// request's deadline, metadata and cancellation, and says how the edge cache took part.
import { expect } from "chai";
import { ServiceCredentials } from "@switchyard/platform/service-credentials.js";
import { callStage } from "../../src/pipeline/call.js";
import { upstreamMetadataStage } from "../../src/pipeline/upstream-metadata.js";
import type { LiveFanout } from "../../src/runtime/live-fanout.js";
import type { RouteContext, RouteResult } from "../../src/runtime/route.js";
import type { UpstreamName, Upstreams } from "../../src/upstreams.js";
import { ADDRESS, caller, exchange } from "./fixtures.js";

describe("pipeline: cancellation and call", () => {
  const upstreams = {} as Upstreams;
  const fanout = {} as LiveFanout;
  const callRoute = callStage({
    upstreams,
    fanout,
    edgeCache: undefined,
    upstreamMetadata: upstreamMetadataStage(
      new ServiceCredentials(async () => ({ token: "gateway-token", expiresInSeconds: 600 })),
    ),
  });
  /** An exchange at the call stage, with a handler that keeps what it was given. */
  function ready(upstream: UpstreamName) {
    const seen: { ctx?: RouteContext } = {};
    const x = exchange("/v1/payments/pay_1?x=1");
    x.route = {
      upstream,
      handler: async (ctx): Promise<RouteResult> => ((seen.ctx = ctx), { status: 200, body: { ok: true } }),
    };
    x.params = { payment_id: "pay_1" };
    x.body = { a: 1 };
    x.caller = caller();
    x.pathMajor = 1;
    x.version = 2;
    x.deadlineAt = Date.now() + 1_000;
    return { x, seen };
  }

  it("calls the route's handler with the request's input and what it needs of the edge", async () => {
    const { x, seen } = ready("payments");
    expect(await callRoute(x)).to.deep.equal({ status: 200, body: { ok: true } });
    const ctx = seen.ctx!;
    expect(ctx.params).to.equal(x.params);
    expect(ctx.body).to.equal(x.body);
    expect(ctx.caller).to.equal(x.caller);
    expect([ctx.path, ctx.version, ctx.base]).to.deep.equal(["/v1/payments/pay_1", 2, "/v1"]);
    expect(ctx.upstreams).to.equal(upstreams);
    expect(ctx.fanout).to.equal(fanout);
    expect(ctx.headers).to.equal(x.req.headers);
  });

  it("gives a unary call the time left of the deadline, the metadata and the request's light cancellation signal", async () => {
    const { x, seen } = ready("payments");
    await callRoute(x);
    const options = seen.ctx!.callOptions();
    expect(options.timeoutMs).to.be.within(900, 1_000);
    expect(options.headers).to.deep.equal({ "x-request-id": "req-1", authorization: "Bearer t-alice" });
    expect(options.signal).to.equal(x.cancellation);
    const stream = seen.ctx!.streamCallOptions();
    expect(stream, "a stream has no deadline").to.not.have.property("timeoutMs");
    expect(stream.signal).to.be.instanceOf(AbortSignal);
  });

  it("waits for the gateway's own token before a call to identity, which is told the client's address", async () => {
    const { x, seen } = ready("identity");
    await callRoute(x);
    expect(seen.ctx!.callOptions().headers).to.include({
      "x-client-address": ADDRESS,
      "service-authorization": "Bearer gateway-token",
    });
  });

  it("cancels at once the calls of a client that left while its request was read or checked", async () => {
    const { x, seen } = ready("payments");
    x.gone = true;
    await callRoute(x);
    expect(x.cancellation?.aborted).to.equal(true);
    expect(seen.ctx!.streamCallOptions().signal!.aborted).to.equal(true);
  });

  it("records how the edge cache took part", async () => {
    const { x, seen } = ready("content");
    await callRoute(x);
    seen.ctx!.cacheResult("hit");
    expect(x.record.cache).to.equal("hit");
  });
});
