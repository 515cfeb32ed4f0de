// End to end through the real mesh: every kind of bad request gets a 4xx with the JSON error
// envelope — never a 5xx, never a dropped connection — and stores nothing.
import { expect } from "chai";
import { connect } from "node:net";
import { request as httpRequest } from "node:http";
import { sendWholeThenRead } from "../support/send-whole-then-read.js";
import {
  ALICE,
  CAROL,
  MESH_PROCESSES,
  expectError,
  newKey,
  startE2eMesh,
  unique,
  type Api,
  type ApiResponse,
  type E2eMesh,
  type RequestOptions,
} from "../support/http.js";

const JSON_TYPE = { "content-type": "application/json" };
const MAX_BODY = 64 * 1024;

/** `depth` nested arrays: [[[…]]]. */
const nestedArrays = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`;

/** A JSON body as bytes with invalid UTF-8 inside a string value. */
function invalidUtf8(prefix: string, suffix: string): Buffer {
  return Buffer.concat([Buffer.from(prefix), Buffer.from([0xc3, 0x28, 0xff, 0xfe]), Buffer.from(suffix)]);
}

interface Case {
  what: string;
  raw?: string | Buffer;
  json?: unknown;
  headers?: Record<string, string>;
  /** The Content-Type sent: application/json when absent, none at all when null. */
  contentType?: string | null;
  status: number | number[];
  /** The expected code; with several statuses allowed, one code per status in the same order. */
  code: string | string[];
}

describe("e2e: bad input through the gateway", function () {
  this.timeout(30_000);

  let env: E2eMesh;
  let api: Api;
  let alice: string;
  let carol: string;
  let paymentId: string;
  let snapshot: { payments: unknown[]; globexPayments: unknown[]; users: unknown[]; refunds: unknown[] };

  const takeSnapshot = async () => ({
    payments: await api.listAll("/v1/payments", alice),
    globexPayments: await api.listAll("/v1/payments", carol),
    users: await api.listAll("/v1/tenants/acme/users", alice),
    refunds: await api.listAll(`/v1/payments/${paymentId}/refunds`, alice),
  });

  before(async function () {
    this.timeout(90_000);
    env = await startE2eMesh("bad-input");
    api = env.api;
    [alice, carol] = await Promise.all([api.login(ALICE), api.login(CAROL)]);
    const created = await api.post("/v1/payments", {
      token: alice,
      key: newKey(),
      json: { amount: 5_000, currency: "EUR", source: "tok_fixture" },
    });
    expect(created.status, created.text).to.equal(201);
    paymentId = created.json.id;
    const refunded = await api.post(`/v1/payments/${paymentId}/refunds`, {
      token: alice,
      key: newKey(),
      json: { amount: 100 },
    });
    expect(refunded.status, refunded.text).to.equal(201);
    snapshot = await takeSnapshot();
    expect(snapshot.payments).to.have.length(1);
  });

  after(async function () {
    this.timeout(30_000);
    await env?.stop();
  });

  /**
   * After every bad request: nothing was stored anywhere, and no process fell over. (Checked inside
   * each test rather than in an afterEach hook, so one failure does not abort the rest of the file.)
   */
  async function expectNothingStored(): Promise<void> {
    expect(await takeSnapshot(), "the stored state changed").to.deep.equal(snapshot);
    for (const name of MESH_PROCESSES) {
      expect(env.mesh.process(name).exitCode, `${name} is still running`).to.equal(null);
    }
  }

  /** A test that must leave no trace. */
  const refuses = (title: string, fn: () => Promise<void>) =>
    it(title, async () => {
      await fn();
      await expectNothingStored();
    });

  function send(
    method: string,
    path: string,
    c: Case,
    token: string | undefined = alice,
    extra: RequestOptions = {},
  ): Promise<ApiResponse> {
    const headers: Record<string, string> = { ...c.headers };
    if (c.contentType !== null) headers["content-type"] = c.contentType ?? "application/json";
    const options: RequestOptions = { token, headers, ...extra };
    // A Buffer body: fetch adds no Content-Type of its own (it would add text/plain for a string).
    if (c.raw !== undefined) options.raw = typeof c.raw === "string" ? Buffer.from(c.raw) : c.raw;
    else options.raw = Buffer.from(JSON.stringify(c.json));
    return api.request(method, path, options);
  }

  function expectCase(res: ApiResponse, c: Case): void {
    expect(res.status, `${c.what}: ${res.text}`).to.be.within(400, 499);
    const statuses = Array.isArray(c.status) ? c.status : [c.status];
    const codes = Array.isArray(c.code) ? c.code : [c.code];
    expect(statuses, `${c.what}: status ${res.status} ${res.text}`).to.include(res.status);
    expectError(res, res.status, codes[statuses.indexOf(res.status)] ?? codes[0]!);
  }

  const validPayment = { amount: 1_000, currency: "EUR", source: "tok_visa" };
  const validUser = { email: "new-user@acme.test", full_name: "New User", password: "long-enough-password" };
  const tooLarge = (body: Record<string, unknown>) =>
    JSON.stringify({ ...body, source: "x".repeat(MAX_BODY), full_name: "y".repeat(MAX_BODY) });

  /** Bad bodies every JSON-taking route must refuse the same way. */
  const commonCases = (valid: Record<string, unknown>): Case[] => [
    { what: "malformed JSON", raw: '{"amount": 1,', status: 400, code: "INVALID_REQUEST" },
    { what: "JSON with a trailing comma", raw: '{"amount": 1,}', status: 400, code: "INVALID_REQUEST" },
    { what: "single-quoted JSON", raw: "{'amount': 1}", status: 400, code: "INVALID_REQUEST" },
    {
      what: "two JSON documents",
      raw: `${JSON.stringify(valid)}${JSON.stringify(valid)}`,
      status: 400,
      code: "INVALID_REQUEST",
    },
    { what: "an empty body", raw: "", status: 400, code: "INVALID_REQUEST" },
    { what: "a whitespace body", raw: "  \n ", status: 400, code: "INVALID_REQUEST" },
    {
      what: "text/plain",
      raw: JSON.stringify(valid),
      contentType: "text/plain",
      status: 415,
      code: "UNSUPPORTED_MEDIA_TYPE",
    },
    {
      what: "no content type",
      raw: JSON.stringify(valid),
      contentType: null,
      status: 415,
      code: "UNSUPPORTED_MEDIA_TYPE",
    },
    {
      what: "form encoding",
      raw: "amount=1&currency=EUR",
      contentType: "application/x-www-form-urlencoded",
      status: 415,
      code: "UNSUPPORTED_MEDIA_TYPE",
    },
    {
      what: "JSON in another charset",
      raw: JSON.stringify(valid),
      contentType: "application/json; charset=iso-8859-1",
      status: 415,
      code: "UNSUPPORTED_MEDIA_TYPE",
    },
    { what: "a body over 64 KiB", raw: tooLarge(valid), status: 413, code: "PAYLOAD_TOO_LARGE" },
    { what: "an array instead of an object", json: [valid], status: 400, code: "INVALID_REQUEST" },
    { what: "a string instead of an object", json: "hello", status: 400, code: "INVALID_REQUEST" },
    { what: "a number instead of an object", json: 42, status: 400, code: "INVALID_REQUEST" },
    { what: "JSON null", raw: "null", status: 400, code: "INVALID_REQUEST" },
    { what: "an empty object", json: {}, status: 400, code: "INVALID_REQUEST" },
    { what: "an unknown field", json: { ...valid, extra: true }, status: 400, code: "INVALID_REQUEST" },
    {
      what: "a __proto__ field",
      raw: JSON.stringify(valid).replace(/^\{/, '{"__proto__":{"admin":true},'),
      status: 400,
      code: "INVALID_REQUEST",
    },
    {
      what: "invalid UTF-8 bytes",
      raw: invalidUtf8(JSON.stringify(valid).slice(0, -2), '"}'),
      status: 400,
      code: "INVALID_REQUEST",
    },
    {
      what: "10 000 nested arrays as a field value",
      raw: JSON.stringify({ ...valid, extra: "X" }).replace('"X"', nestedArrays(10_000)),
      status: 400,
      code: "INVALID_REQUEST",
    },
    {
      what: "10 000 nested objects as the body",
      raw: `${'{"a":'.repeat(10_000)}1${"}".repeat(10_000)}`,
      status: 400,
      code: "INVALID_REQUEST",
    },
  ];

  const paymentCases: Case[] = [
    ...commonCases(validPayment),
    { what: "amount as a string", json: { ...validPayment, amount: "12" }, status: 400, code: "INVALID_REQUEST" },
    { what: "amount 12.5", json: { ...validPayment, amount: 12.5 }, status: 400, code: "INVALID_REQUEST" },
    { what: "amount null", json: { ...validPayment, amount: null }, status: 400, code: "INVALID_REQUEST" },
    {
      what: "amount as an object",
      json: { ...validPayment, amount: { value: 1 } },
      status: 400,
      code: "INVALID_REQUEST",
    },
    { what: "amount as a boolean", json: { ...validPayment, amount: true }, status: 400, code: "INVALID_REQUEST" },
    { what: "currency null", json: { ...validPayment, currency: null }, status: 400, code: "INVALID_REQUEST" },
    {
      what: "currency as an array",
      json: { ...validPayment, currency: ["EUR"] },
      status: 400,
      code: "INVALID_REQUEST",
    },
    {
      what: "10 000 nested arrays as the amount",
      raw: JSON.stringify({ ...validPayment, amount: "X" }).replace('"X"', nestedArrays(10_000)),
      status: 400,
      code: "INVALID_REQUEST",
    },
    // Beyond double range: JSON.parse makes it Infinity, which is not an integer → 400 (a 422 "too
    // large" would be as defensible; what matters is a 4xx and nothing stored).
    {
      what: "amount 1e400",
      raw: JSON.stringify(validPayment).replace('"amount":1000', '"amount":1e400'),
      status: [400, 422],
      code: ["INVALID_REQUEST", "RULE_VIOLATION"],
    },
    {
      what: "amount 12345678901234567890",
      raw: JSON.stringify(validPayment).replace('"amount":1000', '"amount":12345678901234567890'),
      status: 422,
      code: "RULE_VIOLATION",
    },
    {
      what: "amount above the maximum",
      json: { ...validPayment, amount: 100_000_000_001 },
      status: 422,
      code: "RULE_VIOLATION",
    },
    { what: "a negative amount", json: { ...validPayment, amount: -5 }, status: 422, code: "RULE_VIOLATION" },
    { what: "amount 0", json: { ...validPayment, amount: 0 }, status: 422, code: "RULE_VIOLATION" },
    { what: "a lower-case currency", json: { ...validPayment, currency: "eur" }, status: 422, code: "RULE_VIOLATION" },
    {
      what: "an unknown currency XYZ",
      json: { ...validPayment, currency: "XYZ" },
      status: 422,
      code: "RULE_VIOLATION",
    },
    {
      what: "a four-letter currency",
      json: { ...validPayment, currency: "EURO" },
      status: 422,
      code: "RULE_VIOLATION",
    },
    { what: "an empty source", json: { ...validPayment, source: "" }, status: 422, code: "RULE_VIOLATION" },
    {
      what: "a source with control characters",
      json: { ...validPayment, source: "tok\u0000visa" },
      status: 422,
      code: "RULE_VIOLATION",
    },
  ];

  describe("POST /v1/payments", () => {
    for (const c of paymentCases) {
      refuses(`refuses ${c.what}`, async () => {
        expectCase(await send("POST", "/v1/payments", c, alice, { key: newKey() }), c);
      });
    }

    refuses("names a misspelt field, though the field it meant is missing too, on v1 and v2", async () => {
      for (const path of ["/v1/payments", "/v2/payments"]) {
        const res = await api.post(path, {
          token: alice,
          key: newKey(),
          json: { ammount: 5, currency: "EUR", source: "tok_x" },
        });
        expectError(res, 400, "INVALID_REQUEST");
        expect(res.json.error, path).to.equal("unknown field ammount (did you mean amount?)");
      }
    });

    refuses("checks the body before the credential: malformed JSON without a token is 400, not 401", async () => {
      expectError(
        await api.post("/v1/payments", { key: newKey(), raw: "{", headers: JSON_TYPE }),
        400,
        "INVALID_REQUEST",
      );
      expectError(
        await api.post("/v1/payments", { key: newKey(), raw: "{}", headers: { "content-type": "text/plain" } }),
        415,
        "UNSUPPORTED_MEDIA_TYPE",
      );
    });

    refuses("refuses a body over 64 KiB sent chunked (no Content-Length) with 413", async () => {
      // The client streams a little more than the limit and then waits for the answer (it does not
      // keep writing into a connection the server is closing: see the next test for that).
      const url = new URL("/v1/payments", env.mesh.gatewayUrl);
      const res = await new Promise<{
        status: number;
        headers: Record<string, string | string[] | undefined>;
        text: string;
      }>((resolve, reject) => {
        const req = httpRequest(
          url,
          {
            method: "POST",
            headers: {
              ...JSON_TYPE,
              authorization: `Bearer ${alice}`,
              "idempotency-key": newKey(),
              "transfer-encoding": "chunked",
            },
          },
          (r) => {
            let text = "";
            r.setEncoding("utf8")
              .on("data", (d: string) => (text += d))
              .on("end", () => resolve({ status: r.statusCode ?? 0, headers: r.headers, text }));
          },
        );
        req.on("error", reject);
        req.write(`{"amount": 1000, "currency": "EUR", "source": "`);
        for (let i = 0; i < 9; i++) req.write("z".repeat(8 * 1024));
        setTimeout(() => reject(new Error("no answer to a chunked body over the limit within 10 s")), 10_000).unref();
      });
      expect(res.status, res.text).to.equal(413);
      expect(String(res.headers["content-type"])).to.match(/^application\/json/);
      expect(JSON.parse(res.text)).to.deep.include({ code: "PAYLOAD_TOO_LARGE" });
    });

    refuses("answers a 4 MB body with 413 every time, not with a connection reset", async () => {
      // A client that sends its whole (declared-length) body must be able to read the 413: the server
      // may not close the connection under a client that is still sending (RFC 9112 §9.6).
      const big = JSON.stringify({ ...validPayment, source: "x".repeat(4 * 1024 * 1024) });
      const outcomes: string[] = [];
      for (let attempt = 0; attempt < 8; attempt++) {
        try {
          const res = await api.post("/v1/payments", { token: alice, key: newKey(), raw: big, headers: JSON_TYPE });
          outcomes.push(`${res.status} ${res.json?.code}`);
        } catch (err) {
          const cause = (err as { cause?: { code?: string; message?: string } }).cause;
          outcomes.push(`fetch failed: ${cause?.code ?? cause?.message ?? String(err)}`);
        }
      }
      expect(outcomes).to.deep.equal(Array<string>(8).fill("413 PAYLOAD_TOO_LARGE"));
    });

    it("still accepts a valid payment afterwards (the cases above fail for their reason, not at random)", async () => {
      const res = await api.post("/v1/payments", {
        token: alice,
        key: newKey(),
        json: { ...validPayment, source: `tok_${unique()}` },
      });
      expect(res.status, res.text).to.equal(201);
      const payments = await api.listAll("/v1/payments", alice);
      expect(payments).to.have.length(snapshot.payments.length + 1);
      snapshot.payments = payments;
    });
  });

  describe("an answer given before the body is read", () => {
    // The long fuzz run's shrunk case: a client that writes its whole request (`Connection: close`,
    // a body of 120,000 characters, a bogus token) before it reads must still read the edge's answer,
    // though the edge answered before reading the body and then closed (runtime/lingering-close.ts).
    for (const { path, status, code } of [
      { path: "/v1/docs", status: 413, code: "PAYLOAD_TOO_LARGE" }, // the body is checked first
      { path: "/v1/orders/1/cancel", status: 401, code: "UNAUTHENTICATED" }, // no body to read: the token is refused at once
    ]) {
      refuses(
        `answers a 120,000-character body with a bogus token on POST ${path} with ${status}, never a reset`,
        async () => {
          const port = Number(new URL(env.mesh.gatewayUrl).port);
          const answers = await Promise.all(
            Array.from({ length: 6 }, () =>
              sendWholeThenRead(port, {
                path,
                headers: [`Authorization: Bearer ${"A".repeat(1_000)}`, "Content-Type: application/json"],
                bodyBytes: 120_000,
              }),
            ),
          );
          for (const answer of answers) {
            expect(answer.split("\r\n")[0], answer.slice(0, 200)).to.match(new RegExp(`^HTTP/1\\.1 ${status} `));
            expect(answer).to.match(/\r\ncontent-type: application\/json/i);
            expect(JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4))).to.deep.include({ code });
          }
        },
      );
    }
  });

  describe("POST /v1/tenants/acme/users", () => {
    const userCases: Case[] = [
      ...commonCases(validUser),
      { what: "full_name as a number", json: { ...validUser, full_name: 42 }, status: 400, code: "INVALID_REQUEST" },
      { what: "email null", json: { ...validUser, email: null }, status: 400, code: "INVALID_REQUEST" },
      {
        what: "a missing password",
        json: { email: validUser.email, full_name: validUser.full_name },
        status: 400,
        code: "INVALID_REQUEST",
      },
      { what: "role as an array", json: { ...validUser, role: ["admin"] }, status: 400, code: "INVALID_REQUEST" },
      { what: "a too-short password", json: { ...validUser, password: "short" }, status: 422, code: "RULE_VIOLATION" },
      { what: "an unknown role", json: { ...validUser, role: "owner" }, status: 422, code: "RULE_VIOLATION" },
      { what: "an invalid email", json: { ...validUser, email: "no-at-sign" }, status: 422, code: "RULE_VIOLATION" },
      { what: "an empty full_name", json: { ...validUser, full_name: "" }, status: 422, code: "RULE_VIOLATION" },
    ];
    for (const c of userCases) {
      refuses(`refuses ${c.what}`, async () => {
        expectCase(await send("POST", "/v1/tenants/acme/users", c), c);
      });
    }
  });

  describe("POST /v1/payments/{id}/refunds", () => {
    const validRefund = { amount: 1 };
    const refundCases: Case[] = [
      ...commonCases(validRefund),
      { what: "amount as a string", json: { amount: "1" }, status: 400, code: "INVALID_REQUEST" },
      { what: "amount 1.5", json: { amount: 1.5 }, status: 400, code: "INVALID_REQUEST" },
      { what: "reason as a number", json: { amount: 1, reason: 7 }, status: 400, code: "INVALID_REQUEST" },
      { what: "a negative amount", json: { amount: -1 }, status: 422, code: "RULE_VIOLATION" },
      {
        what: "a reason over 500 characters",
        json: { amount: 1, reason: "r".repeat(501) },
        status: 422,
        code: "RULE_VIOLATION",
      },
    ];
    for (const c of refundCases) {
      refuses(`refuses ${c.what}`, async () => {
        expectCase(await send("POST", `/v1/payments/${paymentId}/refunds`, c, alice, { key: newKey() }), c);
      });
    }
  });

  describe("POST /v1/tenants/acme/sessions", () => {
    for (const c of commonCases({ email: ALICE.email, password: "demo-password" })) {
      refuses(`refuses ${c.what}`, async () => {
        expectCase(await send("POST", "/v1/tenants/acme/sessions", c, undefined), c);
      });
    }
  });

  describe("routing", () => {
    for (const path of [
      "/v1/nothing",
      "/v3/payments",
      "/v1/Payments",
      "/",
      "/v1/payments/x/y/z",
      "/v1/tenants/acme/users/1/extra",
      "/v1/payments/",
    ]) {
      refuses(`answers GET ${path} with 404 ROUTE_NOT_FOUND`, async () => {
        expectError(await api.get(path, { token: alice }), 404, "ROUTE_NOT_FOUND");
        expectError(await api.post(path, { token: alice, json: {} }), 404, "ROUTE_NOT_FOUND");
      });
    }

    for (const [method, path, allowed] of [
      ["PUT", "/v1/payments", ["GET", "POST"]],
      ["DELETE", "/v1/payments", ["GET", "POST"]],
      ["PATCH", "/v1/payments/pay_AAAAAAAAAAAAAAAAAAAA", ["GET"]],
      ["POST", "/v1/tenants/acme/users/1", ["GET", "DELETE"]],
      ["GET", "/v1/tenants/acme/sessions", ["POST"]],
    ] as const) {
      refuses(`answers ${method} ${path} with 405 and an Allow header`, async () => {
        const res = await api.request(method, path, {
          token: alice,
          key: newKey(),
          ...(method === "GET" ? {} : { json: validPayment }),
        });
        expectError(res, 405, "METHOD_NOT_ALLOWED");
        const allow = (res.headers.get("allow") ?? "").split(",").map((s) => s.trim());
        expect(allow).to.include.members([...allowed]);
        expect(allow).not.to.include(method);
      });
    }

    for (const path of [
      "/v1/payments/%E0%A4%A",
      "/v1/payments/%",
      "/v1/payments/%ZZ/refunds",
      "/v1/tenants/%E0%A4%A/users",
    ]) {
      refuses(`answers bad percent-encoding ${path} with 400`, async () => {
        expectError(await api.get(path, { token: alice }), 400, "INVALID_REQUEST");
      });
    }

    refuses("answers a request node cannot parse with a JSON 400, not a reset", async () => {
      const { port } = new URL(env.mesh.gatewayUrl);
      const raw = await new Promise<string>((resolve, reject) => {
        const socket = connect(Number(port), "127.0.0.1", () => socket.write("GARBAGE / NOT-HTTP\r\n\r\n"));
        let data = "";
        socket
          .setEncoding("utf8")
          .on("data", (d: string) => (data += d))
          .on("end", () => resolve(data))
          .on("error", reject);
      });
      expect(raw).to.match(/^HTTP\/1\.1 400 /);
      expect(raw).to.match(/content-type: application\/json/i);
      expect(JSON.parse(raw.slice(raw.indexOf("\r\n\r\n") + 4))).to.include({ code: "INVALID_REQUEST" });
    });

    it("serves GET /v1/openapi.json without a credential: 200, JSON, openapi 3.1.0", async () => {
      const res = await api.get("/v1/openapi.json");
      expect(res.status, res.text).to.equal(200);
      expect(res.headers.get("content-type")).to.match(/^application\/json/);
      expect(res.json.openapi).to.equal("3.1.0");
      expect(res.json.paths).to.have.property("/v1/payments");
      expect(res.json.components.schemas.ErrorCode.enum).to.include.members([
        "INVALID_REQUEST",
        "ROUTE_NOT_FOUND",
        "METHOD_NOT_ALLOWED",
        "PAYLOAD_TOO_LARGE",
        "UNSUPPORTED_MEDIA_TYPE",
      ]);
    });

    refuses(
      "v2 refuses a query parameter the route does not take with 400, naming it, on every kind of route",
      async () => {
        const lmit = await api.get("/v2/payments?lmit=5", { token: alice });
        expectError(lmit, 400, "INVALID_REQUEST");
        expect(lmit.json.error).to.equal("unknown query parameter lmit (did you mean limit?)");
        // Public, cached, a single resource, a live feed, the document itself: the same.
        for (const [path, headers] of [
          ["/v2/catalog/items?pge=1", {}],
          [`/v2/payments/${paymentId}?expand=refunds`, {}],
          ["/v2/posts?foo=1", { accept: "text/event-stream" }],
          ["/v2/openapi.json?foo=1", {}],
        ] as const) {
          const res = await api.get(path, { token: alice, headers });
          expectError(res, 400, "INVALID_REQUEST");
          expect(res.json.error, path).to.match(/^unknown query parameter (pge|expand|foo)\b/);
        }
      },
    );

    it("v1 answers it as before, and names what it ignored in X-Ignored-Query-Parameters", async () => {
      const res = await api.get("/v1/payments?lmit=5&limit=1", { token: alice });
      expect(res.status, res.text).to.equal(200);
      expect(res.json.items).to.have.length(1);
      expect(res.headers.get("x-ignored-query-parameters")).to.equal("lmit");
      const known = await api.get("/v1/payments?limit=1", { token: alice });
      expect(known.headers.get("x-ignored-query-parameters")).to.equal(null);
    });

    refuses("answers a repeated query parameter and an unknown Authorization scheme without a 5xx", async () => {
      expectError(await api.get("/v1/payments?cursor=a&cursor=b", { token: alice }), 400, "INVALID_REQUEST");
      const res = await api.get("/v1/payments", { headers: { authorization: "Bearer " + "a".repeat(20_000) } });
      expect(res.status).to.be.within(400, 499);
      expectError(res, res.status, res.status === 431 ? "INVALID_REQUEST" : "UNAUTHENTICATED");
    });
  });
});
