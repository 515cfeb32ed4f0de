// The edge's first step: the fixed paths, the API reference, CORS preflights, the browser proxy and
// the API each answer their own requests, and only the API's go through its pipeline.
import { expect } from "chai";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createLogger } from "@switchyard/platform/logger.js";
import { dispatchStage } from "../src/dispatch.js";
import type { QuotaRecord } from "../src/pipeline/edge-call.js";
import { corsPolicy } from "../src/runtime/cors.js";
import { observeRequest, type RequestRecord } from "../src/runtime/observability.js";
import { sendJson } from "../src/runtime/respond.js";
import { publishedVersions } from "../src/runtime/versions.js";
import type { DocsSite } from "../src/docs.js";
import type { RpcProxy } from "../src/rpc/front.js";

describe("dispatch: which part of the edge answers", () => {
  let server: Server;
  let base: string;
  const api: { pathname: string; search: string; address: string }[] = [];
  const rpc: { path: string; address: string; record: QuotaRecord }[] = [];
  let readinessAsked = 0;

  before(async () => {
    const docs: DocsSite = {
      handles: (pathname) => pathname === "/docs",
      serve: (_req, res) => void res.writeHead(200, { "content-type": "text/html" }).end("<html>docs</html>"),
    };
    const proxy: RpcProxy = {
      handle: (req, res, address, record) => (
        rpc.push({ path: req.url!, address, record }),
        void res.writeHead(200).end("rpc")
      ),
      routeOf: (path) => `${path}#route`,
    };
    const dispatch = dispatchStage({
      versions: publishedVersions(new Date("2027-08-23T00:00:00Z")),
      docs,
      cors: corsPolicy(["https://app.example"]),
      rpc: proxy,
      serveApi: async ({ res, headers, address, pathname, search }) => {
        api.push({ pathname, search, address });
        sendJson(res, { status: 200, body: { api: true }, headers });
      },
      answerReadiness: async (res, headers) => (
        readinessAsked++,
        sendJson(res, { status: 200, body: { status: "ready" }, headers })
      ),
      trustedProxyHops: 1,
    });
    const logger = createLogger("test", "silent");
    server = createServer((req, res) => {
      const record = observeRequest(req, res, { trustedProxyHops: 0, logger, accessLog: false });
      void dispatch(req, res, record, { "x-request-id": record.requestId });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise((resolve) => server.close(resolve)));
  beforeEach(() => {
    api.length = 0;
    rpc.length = 0;
  });

  it("answers /healthz, /readyz, /versions and /metrics itself, outside the API", async () => {
    expect(await (await fetch(`${base}/healthz`)).json()).to.deep.equal({ status: "ok" });
    expect((await fetch(`${base}/readyz`)).status).to.equal(200);
    expect(readinessAsked).to.equal(1);
    const versions = (await (await fetch(`${base}/versions`)).json()) as { versions: { version: string }[] };
    expect(versions.versions.map((v) => v.version)).to.deep.equal(["v1", "v2"]);
    const metrics = await fetch(`${base}/metrics`);
    expect(metrics.headers.get("x-request-id")).to.be.a("string");
    expect(await metrics.text()).to.include("# HELP");
    expect(api).to.deep.equal([]);
  });

  it("hands the API reference its pages", async () => {
    expect(await (await fetch(`${base}/docs`)).text()).to.equal("<html>docs</html>");
    expect(api).to.deep.equal([]);
  });

  it("answers a CORS preflight on an API path, before the API", async () => {
    const res = await fetch(`${base}/v1/payments`, {
      method: "OPTIONS",
      headers: { origin: "https://app.example", "access-control-request-method": "POST" },
    });
    expect(res.status).to.equal(204);
    expect(res.headers.get("access-control-allow-origin")).to.equal("https://app.example");
    expect(api).to.deep.equal([]);
  });

  it("hands /rpc/… to the browser proxy with the client's address and the access record, named by its route", async () => {
    const res = await fetch(`${base}/rpc/switchyard.content.v1.ContentService/GetDocument`, {
      method: "POST",
      headers: { "x-forwarded-for": "203.0.113.5" },
    });
    expect(await res.text()).to.equal("rpc");
    expect(res.headers.get("x-request-id"), "its request id set before the proxy writes").to.be.a("string");
    expect(rpc).to.have.length(1);
    expect(rpc[0]!.address).to.equal("203.0.113.5");
    expect(rpc[0]!.record.requestId).to.equal(res.headers.get("x-request-id"));
    expect((rpc[0]!.record as RequestRecord).route).to.equal(
      "/rpc/switchyard.content.v1.ContentService/GetDocument#route",
    );
    expect(api).to.deep.equal([]);
  });

  it("hands everything else to the API pipeline with its path, query and client address", async () => {
    await fetch(`${base}/v1/payments?limit=5&cursor=x`, {
      headers: { "x-forwarded-for": "198.51.100.1, 203.0.113.9" },
    });
    await fetch(`${base}/v9/anything`);
    expect(api).to.deep.equal([
      { pathname: "/v1/payments", search: "limit=5&cursor=x", address: "203.0.113.9" },
      { pathname: "/v9/anything", search: "", address: "127.0.0.1" },
    ]);
  });
});
