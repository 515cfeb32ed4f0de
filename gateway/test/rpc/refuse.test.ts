// /rpc's refusals made before connect-node reads the request, as each protocol's client reads them:
// gRPC-Web trailers-only (HTTP 200, grpc-status, grpc-message), a Connect stream's end-of-stream
// envelope, Connect unary's JSON error with its HTTP status — the same bytes the proxy wrote by hand.
import { expect } from "chai";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";
import { refuse } from "../../src/rpc/refuse.js";

describe("rpc: refuse", () => {
  let server: Server;
  let url: string;
  let refusal: ConnectError;

  before(async () => {
    server = createServer((req, res) => refuse(req, res, refusal));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/rpc/x.Y/Z`;
  });
  after(() => new Promise((resolve) => server.close(resolve)));

  const post = (contentType: string) =>
    fetch(url, { method: "POST", headers: { "content-type": contentType }, body: "ignored" });

  it("answers gRPC-Web trailers-only: 200, the code and the message (percent-encoded), no body", async () => {
    refusal = new ConnectError("no method x.Y/Z here, 100%", Code.Unimplemented);
    for (const [type, answered] of [
      ["application/grpc-web+proto", "application/grpc-web+proto"],
      ["application/grpc-web", "application/grpc-web+proto"],
      ["application/grpc-web-text", "application/grpc-web-text+proto"],
    ]) {
      const res = await post(type!);
      expect(res.status).to.equal(200);
      expect(res.headers.get("content-type")).to.equal(answered);
      expect(res.headers.get("grpc-status")).to.equal("12");
      expect(res.headers.get("grpc-message")).to.equal(encodeURIComponent("no method x.Y/Z here, 100%"));
      expect((await res.arrayBuffer()).byteLength).to.equal(0);
    }
  });

  it("answers a Connect stream with one end-of-stream envelope holding the error", async () => {
    refusal = new ConnectError("the request is not one enveloped message", Code.InvalidArgument);
    const res = await post("application/connect+proto");
    expect(res.status).to.equal(200);
    expect(res.headers.get("content-type")).to.equal("application/connect+proto");
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(bytes[0], "the end-of-stream flag").to.equal(0b10);
    expect(bytes.readUInt32BE(1)).to.equal(bytes.length - 5);
    expect(JSON.parse(bytes.subarray(5).toString())).to.deep.equal({
      error: { code: "invalid_argument", message: "the request is not one enveloped message" },
    });
  });

  it("answers Connect unary with the JSON error: 404 unimplemented, 400 for the caller's input, 500 for its own failure", async () => {
    for (const [code, status, name] of [
      [Code.Unimplemented, 404, "unimplemented"],
      [Code.InvalidArgument, 400, "invalid_argument"],
      [Code.ResourceExhausted, 400, "resource_exhausted"],
      [Code.Internal, 500, "internal"],
    ] as const) {
      refusal = new ConnectError("said why", code);
      const res = await post("application/proto");
      expect(res.status).to.equal(status);
      expect(res.headers.get("content-type")).to.equal("application/json");
      expect(await res.text()).to.equal(JSON.stringify({ code: name, message: "said why" }));
    }
  });
});
