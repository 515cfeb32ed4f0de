// Stages represent and respond: the route's result and every refusal or failure written with the
// headers gathered on the way; a 5xx logged (without a flood), never with upstream internals.
import { expect } from "chai";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Code, ConnectError } from "@connectrpc/connect";
import { createLogger } from "@switchyard/platform/logger.js";
import { answerStage } from "../../src/pipeline/answer.js";
import { ApiExchange } from "../../src/pipeline/api-exchange.js";
import { RequestCancellation } from "../../src/runtime/cancellation.js";
import { edgeError } from "../../src/runtime/errors.js";
import { FailureLog } from "../../src/runtime/failure-log.js";
import { ADDRESS, fakeVerifier, record } from "./fixtures.js";

describe("pipeline: represent and respond", () => {
  const reported: string[] = [];
  const failures = new FailureLog(createLogger("test", "silent"));
  failures.report = (code) => void reported.push(code);
  const answers = answerStage({ verifier: fakeVerifier().verifier, heartbeatMs: 60_000, failures });
  after(() => failures.stop());
  beforeEach(() => (reported.length = 0));

  /** The answer `write` gives a request: status, headers and body as a client reads them. */
  async function answered(write: (x: ApiExchange) => unknown, presentedToken = false) {
    const server = createServer((req, res) => {
      const x = new ApiExchange({
        req,
        res,
        record: record(),
        headers: { "x-request-id": "req-1", "x-ratelimit-limit": "10" },
        address: ADDRESS,
        pathname: "/v1/x",
        search: "",
      });
      x.presentedToken = presentedToken;
      x.upstream = "payments";
      void write(x);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/x`);
      return { status: res.status, headers: res.headers, body: await res.text() };
    } finally {
      server.close();
    }
  }

  it("writes a JSON result with the gathered headers and the route's own", async () => {
    const res = await answered((x) =>
      answers.respond(x, { status: 201, body: { id: "p1" }, headers: { location: "/v1/x/p1" } }),
    );
    expect(res.status).to.equal(201);
    expect(JSON.parse(res.body)).to.deep.equal({ id: "p1" });
    expect(res.headers.get("content-type")).to.equal("application/json; charset=utf-8");
    expect(res.headers.get("location")).to.equal("/v1/x/p1");
    expect(res.headers.get("x-request-id")).to.equal("req-1");
    expect(res.headers.get("x-ratelimit-limit")).to.equal("10");
  });

  it("writes a body already serialized (the edge cache's) as it is", async () => {
    const res = await answered((x) => answers.respond(x, { status: 200, serialized: Buffer.from('{"cached":true}') }));
    expect(res.body).to.equal('{"cached":true}');
    expect(res.headers.get("content-length")).to.equal("15");
  });

  it("writes a live stream as text/event-stream", async () => {
    async function* events() {
      yield { id: "1", data: { n: 1 } };
    }
    const res = await answered((x) => {
      x.cancellation = new RequestCancellation();
      return answers.respond(x, { status: 200, events: events() });
    });
    expect(res.headers.get("content-type")).to.equal("text/event-stream; charset=utf-8");
    expect(res.body).to.include('id: 1\ndata: {"n":1}');
  });

  it("answers a refusal with its status, the error envelope and its headers, without logging it", async () => {
    const res = await answered((x) =>
      answers.fail(x, edgeError("TOO_MANY_STREAMS", "at most 1", { "retry-after": "5" })),
    );
    expect(res.status).to.equal(429);
    expect(JSON.parse(res.body)).to.deep.equal({ error: "at most 1", code: "TOO_MANY_STREAMS" });
    expect(res.headers.get("retry-after")).to.equal("5");
    expect(res.headers.get("x-request-id")).to.equal("req-1");
    expect(reported).to.deep.equal([]);
  });

  it("asks for a token on 401, and says when the one presented is no good", async () => {
    const refused = edgeError("UNAUTHENTICATED", "a bearer token is required");
    expect((await answered((x) => answers.answerError(x, refused))).headers.get("www-authenticate")).to.equal(
      'Bearer realm="switchyard"',
    );
    const invalid = await answered((x) => answers.answerError(x, refused), true);
    expect(invalid.headers.get("www-authenticate")).to.equal('Bearer realm="switchyard", error="invalid_token"');
  });

  it("answers a failure upstream with the gateway's own 5xx message naming the service, and logs it", async () => {
    const res = await answered((x) =>
      answers.fail(x, new ConnectError("connect ECONNREFUSED 10.0.0.7:50052", Code.Unavailable)),
    );
    expect(res.status).to.equal(502);
    expect(JSON.parse(res.body)).to.deep.equal({
      error: "the payments service is unavailable",
      code: "UPSTREAM_UNAVAILABLE",
    });
    expect(reported).to.deep.equal(["UPSTREAM_UNAVAILABLE"]);
  });

  it("answers anything else thrown with 500 INTERNAL, logged", async () => {
    const res = await answered((x) => answers.fail(x, new TypeError("a bug")));
    expect(res.status).to.equal(500);
    expect(JSON.parse(res.body)).to.deep.equal({ error: "internal error", code: "INTERNAL" });
    expect(reported).to.deep.equal(["INTERNAL"]);
  });
});
