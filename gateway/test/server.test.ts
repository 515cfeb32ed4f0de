// The edge's HTTP server (server.ts): what Node answers itself gets the JSON error body too — raw
// status lines where there is no response object — a pipeline that throws is a 500, and closing drains.
import { expect } from "chai";
import { connect } from "node:net";
import { createLogger } from "@switchyard/platform/logger.js";
import { listenEdge, type EdgeServer } from "../src/server.js";
import { sendJson } from "../src/runtime/respond.js";
import { Router } from "../src/runtime/router.js";
import { loadApiDocument, servedApiPath } from "../src/runtime/openapi.js";

/** What the server writes back for raw bytes sent on a new connection, until it closes. */
function exchangeRaw(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(bytes));
    let text = "";
    socket.on("data", (chunk) => (text += chunk.toString()));
    socket.on("close", () => resolve(text));
    socket.on("error", reject);
  });
}

describe("the edge's HTTP server", () => {
  let edge: EdgeServer;

  before(async () => {
    edge = await listenEdge({
      host: "127.0.0.1",
      port: 0,
      listenFd: undefined,
      trustedProxyHops: 0,
      logger: createLogger("test", "silent"),
      router: new Router(loadApiDocument(servedApiPath(1)).operations),
      dispatch(req, res, _record, headers) {
        if (req.url === "/throws") throw new Error("a bug");
        if (req.url === "/rejects") return Promise.reject(new Error("a bug"));
        sendJson(res, { status: 200, body: { ok: true }, headers });
      },
    });
  });
  after(() => edge.close(0));

  it("hands a request to the pipeline with its request id among the headers", async () => {
    const res = await fetch(`http://127.0.0.1:${edge.port}/anything`);
    expect(await res.json()).to.deep.equal({ ok: true });
    expect(res.headers.get("x-request-id")).to.match(/\S+/);
  });

  it("answers 500 INTERNAL when the pipeline throws or rejects", async () => {
    for (const path of ["/throws", "/rejects"]) {
      const res = await fetch(`http://127.0.0.1:${edge.port}${path}`);
      expect(res.status, path).to.equal(500);
      expect(await res.json()).to.deep.equal({ error: "internal error", code: "INTERNAL" });
      expect(res.headers.get("x-request-id")).to.match(/\S+/);
    }
  });

  it("refuses an HTTP/1.1 request without Host with 400", async () => {
    const text = await exchangeRaw(edge.port, "GET /anything HTTP/1.1\r\nConnection: close\r\n\r\n");
    expect(text).to.match(/^HTTP\/1\.1 400 /);
    expect(text).to.include('"code":"INVALID_REQUEST"');
  });

  it("answers a request Node cannot parse with a raw 400 and the JSON error body", async () => {
    const text = await exchangeRaw(edge.port, "GET /anything HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n");
    expect(text).to.match(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(text).to.include("content-type: application/json; charset=utf-8");
    expect(text.endsWith('{"error":"malformed HTTP request","code":"INVALID_REQUEST"}')).to.equal(true);
  });

  it("answers headers that are too large with a raw 431", async () => {
    const text = await exchangeRaw(edge.port, `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`);
    expect(text).to.match(/^HTTP\/1\.1 431 Request Header Fields Too Large\r\n/);
    expect(text).to.include('"error":"request headers are too large"');
  });

  it("answers CONNECT as the router would answer its path: 404, or 400 for a target that is no path", async () => {
    const unknown = await exchangeRaw(edge.port, "CONNECT /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n");
    expect(unknown).to.match(/^HTTP\/1\.1 404 Not Found\r\n/);
    const proxy = await exchangeRaw(edge.port, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
    expect(proxy).to.match(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(proxy).to.include("CONNECT is not supported: this is not a proxy");
  });

  it("answers CONNECT on a known path with 405 and Allow", async () => {
    const text = await exchangeRaw(edge.port, "CONNECT /v1/payments HTTP/1.1\r\nHost: x\r\n\r\n");
    expect(text).to.match(/^HTTP\/1\.1 405 Method Not Allowed\r\n/);
    expect(text).to.match(/\r\nallow: [A-Z, ]+\r\n/);
  });

  it("refuses an Expect it does not support with 417", async () => {
    const text = await exchangeRaw(
      edge.port,
      "POST /x HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    expect(text).to.match(/^HTTP\/1\.1 417 /);
    expect(text).to.include("unsupported Expect: 200-ok");
  });

  it("lets a request in flight finish when closing, then stops", async () => {
    const draining = await listenEdge({
      host: "127.0.0.1",
      port: 0,
      listenFd: undefined,
      trustedProxyHops: 0,
      logger: createLogger("test", "silent"),
      router: new Router([]),
      dispatch: (_req, res, _record, headers) =>
        new Promise<void>((resolve) =>
          setTimeout(() => (sendJson(res, { status: 200, body: { finished: true }, headers }), resolve()), 100),
        ),
    });
    const answer = fetch(`http://127.0.0.1:${draining.port}/`).then((r) => r.json());
    await new Promise((r) => setTimeout(r, 30));
    // Past the drain time what is left (here the client's idle keep-alive connection) is cut.
    const closed = draining.close(500);
    expect(await answer).to.deep.equal({ finished: true });
    await closed;
    expect(draining.server.listening).to.equal(false);
  });
});
