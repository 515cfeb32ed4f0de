// The browser proxy's admission, /v1's stages: a call the concurrency limit sheds draws nothing on the
// caller's quota (the refusal is the gateway's) and carries it as it stands, and a call the quota
// refuses gives its place back.
import { expect } from "chai";
import { ServiceCredentials } from "@switchyard/platform/service-credentials.js";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { TokenVerifier } from "@switchyard/platform/auth.js";
import { rpcProxy } from "../../src/rpc/front.js";
import { edgePolicy } from "../../src/pipeline/edge-policy.js";
import { AdaptiveConcurrencyLimit } from "../../src/runtime/concurrency-limit.js";
import { createRateLimiter, quotaKey, type RateLimiter } from "../../src/runtime/rate-limit.js";
import { StreamSlots } from "../../src/runtime/streams.js";
import type { Upstreams } from "../../src/upstreams.js";

const ADDRESS = "192.0.2.61";
const QUOTA = 2;

describe("browser proxy (/rpc): shedding and the quota", () => {
  let server: Server;
  let url: string;
  let concurrency: AdaptiveConcurrencyLimit;
  let rateLimiter: RateLimiter;
  let upstreamCalls = 0;
  let sheds = 0;

  before(async () => {
    // A fixed limit of one request at a time, and a quota of QUOTA calls per address.
    concurrency = new AdaptiveConcurrencyLimit({ initialLimit: 1, minLimit: 1, maxLimit: 1 });
    rateLimiter = createRateLimiter({ limit: QUOTA, windowSeconds: 600, keyPrefix: `rpc-admission-${process.pid}` });
    const content = {
      getDocument: async () => (upstreamCalls++, { document: { id: "doc_x", title: "t", body: "b", etag: '"e"' } }),
    };
    const policy = edgePolicy({
      verifier: {} as TokenVerifier,
      // Content's calls carry no client address, so the gateway's own token is never asked for.
      ownCredentials: new ServiceCredentials(() => Promise.reject(new Error("not asked for content's calls"))),
      rateLimiter,
      rateLimit: QUOTA,
      rateWindowSeconds: 600,
      concurrency,
      streamSlots: new StreamSlots(1),
      maxStreamsPerCaller: 1,
      deadlineMs: 1_000,
      maxDeadlineMs: 1_000,
      onShed: () => sheds++,
    });
    const rpc = rpcProxy({
      upstreams: { identity: {}, payments: {}, orders: {}, content } as unknown as Upstreams,
      policy,
      maxBodyBytes: 64 * 1024,
    });
    server = createServer((req, res) => rpc.handle(req, res, ADDRESS, { requestId: "r", quotaKind: undefined }));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/rpc/switchyard.content.v1.ContentService/GetDocument`;
  });
  after(async () => {
    await new Promise((resolve) => server.close(resolve));
    await rateLimiter.close();
  });

  const call = async () => {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ documentId: "doc_x" }),
    });
    return { status: res.status, headers: res.headers, body: (await res.json()) as { code?: string } };
  };
  const remaining = async () =>
    Number((await rateLimiter.peek(quotaKey(undefined, ADDRESS))).headers["x-ratelimit-remaining"]);

  it("sheds at the limit with unavailable, drawing nothing on the caller's quota", async () => {
    const held = concurrency.tryAcquire();
    expect(held, "the one place, taken by another request").to.not.equal(undefined);
    try {
      for (let i = 0; i < 3; i++) {
        const shed = await call();
        expect(shed.status).to.equal(503);
        expect(shed.body.code).to.equal("unavailable");
        expect(shed.headers.get("retry-after")).to.equal("1");
        expect(shed.headers.get("x-ratelimit-remaining"), "the quota as it stands, as /v1 says it").to.equal(
          String(QUOTA),
        );
      }
    } finally {
      held!(false);
    }
    expect(sheds).to.equal(3);
    expect(upstreamCalls).to.equal(0);
    expect(await remaining(), "three shed calls drew nothing").to.equal(QUOTA);
  });

  it("refuses past the quota with resource_exhausted and gives the limit's place back each time", async () => {
    for (let i = 0; i < QUOTA; i++) expect((await call()).status).to.equal(200);
    for (let i = 0; i < 3; i++) {
      const refused = await call();
      expect(refused.body.code).to.equal("resource_exhausted");
      expect(refused.headers.get("retry-after")).to.match(/^\d+$/);
      expect(refused.headers.get("x-ratelimit-remaining")).to.equal("0");
      expect(concurrency.inflight, "the refused call holds no place").to.equal(0);
    }
    expect(upstreamCalls).to.equal(QUOTA);
    // With its one place free, the limit still admits: the next refusal is the quota's again, not a shed.
    expect((await call()).body.code).to.equal("resource_exhausted");
    // Without a place, past the quota: the quota's refusal comes first, as on /v1.
    const held = concurrency.tryAcquire()!;
    try {
      expect((await call()).body.code).to.equal("resource_exhausted");
    } finally {
      held(false);
    }
    expect(sheds).to.equal(3);
  });
});
