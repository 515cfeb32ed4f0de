// The browser proxy (/rpc) and a client's own priority (issue 46, "attack it"): a client that sends
// `x-switchyard-priority: critical` — or any other priority header — gets none of it forwarded to the
// service, and is shed at the limit like any other call. /rpc's calls are `default` (edge-call.ts),
// as /v1's test of the same attack shows for routes (pipeline/api.test.ts).
import { expect } from "chai";
import type { CallOptions } from "@connectrpc/connect";
import { PRIORITY_HEADER } from "@switchyard/platform/priority.js";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { TokenVerifier } from "@switchyard/platform/auth.js";
import { rpcProxy } from "../../src/rpc/front.js";
import { testPolicy } from "../pipeline/composed.js";
import { AdaptiveConcurrencyLimit } from "../../src/runtime/concurrency-limit.js";
import { createRateLimiter, type RateLimiter } from "../../src/runtime/rate-limit.js";
import type { Upstreams } from "../../src/upstreams.js";

describe("browser proxy (/rpc): a client's own priority header", () => {
  let server: Server;
  let url: string;
  let concurrency: AdaptiveConcurrencyLimit;
  let rateLimiter: RateLimiter;
  /** The headers each upstream call carried. */
  let sent: Record<string, string>[] = [];

  before(async () => {
    concurrency = new AdaptiveConcurrencyLimit({ initialLimit: 1, minLimit: 1, maxLimit: 1 });
    rateLimiter = createRateLimiter({ limit: 1000, windowSeconds: 600, keyPrefix: `rpc-priority-${process.pid}` });
    const content = {
      getDocument: async (_req: unknown, options: CallOptions) => {
        sent.push({ ...(options.headers as Record<string, string>) });
        return { document: { id: "doc_x", title: "t", body: "b", etag: '"e"' } };
      },
    };
    const policy = testPolicy({ verifier: {} as TokenVerifier, rateLimiter, rateLimit: 1000, concurrency });
    const rpc = rpcProxy({
      upstreams: { identity: {}, payments: {}, orders: {}, content } as unknown as Upstreams,
      policy,
      maxBodyBytes: 64 * 1024,
    });
    server = createServer((req, res) => rpc.handle(req, res, "192.0.2.62", { requestId: "r", quotaKind: undefined }));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/rpc/switchyard.content.v1.ContentService/GetDocument`;
  });
  after(async () => {
    await new Promise((resolve) => server.close(resolve));
    await rateLimiter.close();
  });

  const call = async (headers: Record<string, string>) => {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify({ documentId: "doc_x" }),
    });
    return { status: res.status, body: (await res.json()) as { code?: string } };
  };

  it("forwards none of it: the service's call carries no priority of the client's", async () => {
    for (const priority of ["critical", "sheddable", "default", "urgent"]) {
      sent = [];
      const answer = await call({ [PRIORITY_HEADER]: priority });
      expect(answer.status, priority).to.equal(200);
      expect(sent, priority).to.have.length(1);
      expect(sent[0]![PRIORITY_HEADER], `${priority}: /rpc's calls are default, sent as no header`).to.equal(undefined);
    }
    // Sent as gRPC metadata's binary or trailing forms, or in another case, it is the same header: dropped too.
    sent = [];
    expect(
      (await call({ "X-Switchyard-Priority": "critical", [`${PRIORITY_HEADER}-bin`]: "Y3JpdGljYWw=" })).status,
    ).to.equal(200);
    expect(Object.keys(sent[0]!).filter((k) => k.toLowerCase().startsWith(PRIORITY_HEADER))).to.deep.equal([]);
  });

  it("cannot raise it at admission: with no place free, a call that says critical is shed like any other", async () => {
    const held = concurrency.tryAcquire();
    expect(held, "the one place, taken by another request").to.not.equal(undefined);
    sent = [];
    try {
      const shed = await call({ [PRIORITY_HEADER]: "critical" });
      expect(shed.status).to.equal(503);
      expect(shed.body.code).to.equal("unavailable");
    } finally {
      held!(false);
    }
    expect(sent, "nothing reached the service").to.deep.equal([]);
  });
});
