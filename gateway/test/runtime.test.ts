// The gateway's runtime pieces on their own: document ↔ handlers, the error table, the router, quota keys.
import { expect } from "chai";
import type { IncomingMessage } from "node:http";
import { Code, ConnectError } from "@connectrpc/connect";
import { errorCatalogue, fail } from "@switchyard/platform/errors.js";
import type { Caller } from "@switchyard/platform/caller.js";
import { bindRoutes } from "../src/routes/table.js";
import { toHttpError, HttpError } from "../src/runtime/errors.js";
import { describeBodyError, loadApiDocument, openApiPath, servedApiPath } from "../src/runtime/openapi.js";
import { createRateLimiter, quotaKey } from "../src/runtime/rate-limit.js";
import { clientAddress } from "../src/runtime/client-address.js";
import { StreamSlots, wantsEventStream } from "../src/runtime/streams.js";
import { Router } from "../src/runtime/router.js";

const api = loadApiDocument();

describe("gateway runtime", () => {
  describe("the OpenAPI document", () => {
    it("has exactly one handler per operation of the published documents, and no handler without an operation", () => {
      const operations = [1, 2].flatMap((major) => loadApiDocument(openApiPath(major)).operations);
      expect(() => bindRoutes(operations)).to.not.throw();
      const extra = { upstream: "payments" as const, handlers: { notInTheDocument: async () => ({ status: 200 }) } };
      expect(() => bindRoutes(operations, [extra])).to.throw(/disagree/);
      // v1 alone lacks v2's own operations (webhook endpoints): their handlers have no operation there.
      expect(() => bindRoutes(api.operations)).to.throw(/without operation \[createWebhookEndpoint/);
    });

    it("documents every error code the catalogue can answer with, and no other", () => {
      const documented = (api.document.components as Record<string, Record<string, { enum: string[] }>>)
        .schemas!.ErrorCode!.enum.slice()
        .sort();
      expect(documented).to.deep.equal(Object.keys(errorCatalogue).sort());
    });

    it("states its paths without verbs, under /v1", () => {
      for (const op of api.operations) {
        expect(op.pathTemplate).to.match(/^\/v1\//);
        for (const segment of op.pathTemplate.split("/"))
          expect(segment).to.not.match(/^(create|get|delete|update|list|add|remove|do)([A-Z_-]|$)/);
      }
    });

    it("classifies body problems: shape → 400, values → 422", () => {
      const createPayment = api.operations.find((o) => o.operationId === "createPayment")!;
      const check = (body: unknown) => {
        expect(createPayment.validateBody!(body)).to.equal(false);
        return createPayment.validateBody!.errors![0]!.keyword;
      };
      expect(check({ amount: "1", currency: "EUR", source: "s" })).to.equal("type");
      expect(check({ currency: "EUR", source: "s" })).to.equal("required");
      expect(check({ amount: 1, currency: "EUR", source: "s", extra: 1 })).to.equal("additionalProperties");
      expect(check({ amount: -1, currency: "EUR", source: "s" })).to.equal("minimum");
      expect(createPayment.validateBody!({ amount: 1, currency: "EUR", source: "s" })).to.equal(true);
    });

    it("checks an import's items one by one (x-switchyard-per-line-items), and takes it as NDJSON too — only it", () => {
      const imports = api.operations.find((o) => o.operationId === "createCatalogImport")!;
      expect(api.operations.filter((o) => o.acceptsNdjson || o.validateLine).map((o) => o.operationId)).to.deep.equal([
        "createCatalogImport",
      ]);
      // The request is the array; its elements are the job's lines.
      expect(imports.validateBody!([17, {}, { sku: "A-1" }])).to.equal(true);
      expect(imports.validateBody!({ items: [] })).to.equal(false);
      expect(describeBodyError(imports.validateBody!.errors![0]!)).to.deep.equal({
        status: 400,
        message: "body must be of type array",
      });
      expect(imports.validateBody!([])).to.equal(false);
      expect(describeBodyError(imports.validateBody!.errors![0]!).status).to.equal(422);
      const line = (value: unknown) =>
        imports.validateLine!(value) ? undefined : describeBodyError(imports.validateLine!.errors![0]!, "item");
      expect(line({ sku: "A-1", name: "A thing", price: 100, currency: "EUR" })).to.equal(undefined);
      expect(line(17)).to.deep.equal({ status: 400, message: "item must be of type object" });
      expect(line({ sku: "A-1", name: "A thing", price: "100", currency: "EUR" })).to.deep.equal({
        status: 400,
        message: "price must be of type integer",
      });
      expect(line({ sku: "A-1", name: "A thing", price: -1, currency: "EUR" })).to.deep.equal({
        status: 422,
        message: "price must be >= 0",
      });
    });
  });

  describe("error → HTTP status (one table)", () => {
    const cases: [unknown, number, string][] = [
      [fail("RULE_VIOLATION", "x"), 422, "RULE_VIOLATION"],
      [fail("INVALID_REQUEST", "x"), 400, "INVALID_REQUEST"],
      [fail("INVALID_CURSOR", "x"), 400, "INVALID_CURSOR"],
      [fail("IDEMPOTENCY_KEY_REUSED", "x"), 422, "IDEMPOTENCY_KEY_REUSED"],
      [fail("IDEMPOTENCY_KEY_IN_FLIGHT", "x"), 409, "IDEMPOTENCY_KEY_IN_FLIGHT"],
      [fail("INVALID_STATE", "x"), 409, "INVALID_STATE"],
      [fail("ETAG_MISMATCH", "x"), 412, "ETAG_MISMATCH"],
      [fail("TENANT_MISMATCH", "x"), 403, "TENANT_MISMATCH"],
      [fail("UNAUTHENTICATED", "x"), 401, "UNAUTHENTICATED"],
      [fail("NOT_FOUND", "x"), 404, "NOT_FOUND"],
      [fail("LOAD_SHED", "x"), 503, "LOAD_SHED"],
      [new ConnectError("connect ECONNREFUSED", Code.Unavailable), 502, "UPSTREAM_UNAVAILABLE"],
      [new ConnectError("Deadline exceeded", Code.DeadlineExceeded), 504, "DEADLINE_EXCEEDED"],
      [new ConnectError("boom", Code.Internal), 500, "INTERNAL"],
      [new ConnectError("?", Code.Unknown), 502, "UPSTREAM_UNAVAILABLE"],
      [new Error("a bug"), 500, "INTERNAL"],
    ];
    for (const [err, status, code] of cases) {
      it(`${err instanceof ConnectError ? `${Code[err.code]} ${err.rawMessage}` : "a plain Error"} → ${status} ${code}`, () => {
        const http = toHttpError(err, "payments");
        expect(http.status).to.equal(status);
        expect(http.code).to.equal(code);
      });
    }

    it("never echoes upstream internals in a 5xx message, and asks 503s to come back later", () => {
      expect(toHttpError(new ConnectError("pg: password authentication failed", Code.Internal)).message).to.equal(
        "internal error",
      );
      expect(
        toHttpError(new ConnectError("connect ECONNREFUSED 10.0.0.1", Code.Unavailable), "payments").message,
      ).to.equal("the payments service is unavailable");
      expect(toHttpError(fail("LOAD_SHED", "busy")).headers).to.have.property("retry-after");
    });
    it("serializes an error's body once, with its details when it has them", () => {
      const shed = new HttpError(503, "LOAD_SHED", "at capacity");
      expect(JSON.parse(shed.body)).to.deep.equal({ error: "at capacity", code: "LOAD_SHED" });
      expect(shed.body, "the same string each time").to.equal(shed.body);
      const changed = new HttpError(409, "PRICE_CHANGED", "the price changed", { details: { price: 1200 } });
      expect(JSON.parse(changed.body)).to.deep.equal({
        error: "the price changed",
        code: "PRICE_CHANGED",
        details: { price: 1200 },
      });
    });
  });

  describe("router", () => {
    const router = new Router(api.operations);
    it("matches a templated path and decodes its parameters", () => {
      const m = router.match("GET", "/v1/tenants/acme/users/42");
      expect(m.operation.operationId).to.equal("getUser");
      expect(m.pathParams).to.deep.equal({ tenant_id: "acme", user_id: "42" });
    });
    it("answers 404 for an unknown path and 405 with Allow for another method", () => {
      const unknown = (() => {
        try {
          router.match("GET", "/v1/nope");
        } catch (e) {
          return e as HttpError;
        }
      })();
      expect(unknown?.status).to.equal(404);
      const method = (() => {
        try {
          router.match("PUT", "/v1/payments");
        } catch (e) {
          return e as HttpError;
        }
      })();
      expect(method?.status).to.equal(405);
      expect(method?.headers.allow?.split(", ").sort()).to.deep.equal(["GET", "HEAD", "POST"]);
    });
    it("finds, through its index by version and collection, what a scan of every operation of every version finds", () => {
      const v2 = loadApiDocument(servedApiPath(2));
      const all = [...api.operations, ...v2.operations];
      const indexed = new Router(all);
      /** The answer of trying every operation in document order (the router before its index). */
      const scan = (method: string, path: string) => {
        const hits = all.filter((o) => o.pattern.test(path));
        const hit = hits.find((o) => o.method === method || (method === "HEAD" && o.method === "GET"));
        return hit ? hit.operationId : hits.length > 0 ? 405 : 404;
      };
      const outcome = (method: string, path: string) => {
        try {
          return indexed.match(method, path).operation.operationId;
        } catch (e) {
          return (e as HttpError).status;
        }
      };
      const paths = all.flatMap((o) => [
        o.pathTemplate.replace(/\{\w+\}/g, "x1"),
        o.pathTemplate.replace(/\{\w+\}/g, "a%2Fb"),
        `${o.pathTemplate.replace(/\{\w+\}/g, "x1")}/extra`,
      ]);
      paths.push("/", "/v1", "/v1/", "/v3/payments", "/v1/payments/", "//v1/payments", "/v1//payments");
      let compared = 0;
      for (const path of paths) {
        for (const method of ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]) {
          expect(outcome(method, path), `${method} ${path}`).to.equal(scan(method, path));
          compared++;
        }
      }
      expect(compared).to.be.greaterThan(1_000);
    });
    it("decodes only what is percent-encoded, refuses bad encoding with 400, and matches a template whose collection is a parameter", () => {
      expect(router.match("GET", "/v1/tenants/ac%20me/users/42").pathParams.tenant_id).to.equal("ac me");
      const bad = (() => {
        try {
          router.match("GET", "/v1/tenants/%E0%A4%A/users/42");
        } catch (e) {
          return e as HttpError;
        }
      })();
      expect(bad?.status).to.equal(400);
      const byParameter = {
        ...api.operations[0]!,
        operationId: "anyCollection",
        method: "GET",
        pathTemplate: "/v9/{collection}",
        pattern: /^\/v9\/([^/]+)$/,
        pathParams: ["collection"],
      };
      const withParameterLead = new Router([...api.operations, byParameter]);
      expect(withParameterLead.match("GET", "/v9/things").pathParams).to.deep.equal({ collection: "things" });
      expect(withParameterLead.match("GET", "/v1/tenants/acme/users/42").operation.operationId).to.equal("getUser");
    });
  });

  describe("quota keys and client addresses", () => {
    const request = (headers: Record<string, string | string[]>, remoteAddress = "192.0.2.7") =>
      ({ headers, socket: { remoteAddress } }) as unknown as IncomingMessage;
    const caller = (tenantId: string, userId: bigint, token: string): Caller => ({
      tenantId,
      userId,
      role: "member",
      sessionId: "s",
      expiresAt: 0,
      token,
    });

    it("draw one quota per verified user — every token of theirs together — and per client address otherwise", () => {
      expect(quotaKey(caller("acme", 2n, "t1"), "192.0.2.7")).to.equal("user:acme:2");
      expect(quotaKey(caller("acme", 2n, "t2"), "198.51.100.1"), "another token and address of the same user").to.equal(
        "user:acme:2",
      );
      expect(
        quotaKey(caller("globex", 2n, "t3"), "192.0.2.7"),
        "the same id in another tenant is another user",
      ).to.equal("user:globex:2");
      expect(quotaKey(undefined, "192.0.2.7")).to.equal("addr:192.0.2.7");
    });

    it("peek at a quota without drawing on it: a fresh one is whole, a used one as it stands, an exhausted one refused", async () => {
      const limiter = createRateLimiter({ limit: 3, windowSeconds: 60, keyPrefix: `peek-test-${process.pid}` });
      try {
        const fresh = await limiter.peek("user:acme:1");
        expect(fresh.allowed).to.equal(true);
        expect(fresh.headers["x-ratelimit-limit"]).to.equal("3");
        expect(fresh.headers["x-ratelimit-remaining"]).to.equal("3");
        expect(Number(fresh.headers["x-ratelimit-reset"])).to.be.within(Date.now() / 1000, Date.now() / 1000 + 61);
        expect((await limiter.check("user:acme:1")).headers["x-ratelimit-remaining"]).to.equal("2");
        for (let i = 0; i < 3; i++)
          expect(
            (await limiter.peek("user:acme:1")).headers["x-ratelimit-remaining"],
            "peeking draws nothing",
          ).to.equal("2");
        expect((await limiter.check("user:acme:1")).headers["x-ratelimit-remaining"]).to.equal("1");
        await limiter.check("user:acme:1");
        const exhausted = await limiter.peek("user:acme:1");
        expect(exhausted.allowed).to.equal(false);
        expect(exhausted.headers["x-ratelimit-remaining"]).to.equal("0");
        expect(exhausted.headers["retry-after"]).to.match(/^\d+$/);
      } finally {
        await limiter.close();
      }
    });

    it("take the socket's peer with no trusted proxy, whatever X-Forwarded-For says", () => {
      expect(clientAddress(request({ "x-forwarded-for": "203.0.113.9" }), 0)).to.equal("192.0.2.7");
      expect(clientAddress(request({}), 0)).to.equal("192.0.2.7");
    });

    it("take the N-th X-Forwarded-For entry from the right behind N trusted proxies, never the client-written left ones", () => {
      // The client wrote "1.1.1.1"; Envoy appended the address it saw (203.0.113.9).
      expect(clientAddress(request({ "x-forwarded-for": "1.1.1.1, 203.0.113.9" }), 1)).to.equal("203.0.113.9");
      expect(clientAddress(request({ "x-forwarded-for": "1.1.1.1, 203.0.113.9, 10.0.0.2" }), 2)).to.equal(
        "203.0.113.9",
      );
      expect(
        clientAddress(request({ "x-forwarded-for": ["1.1.1.1", "203.0.113.9"] }), 1),
        "repeated headers count in order",
      ).to.equal("203.0.113.9");
      expect(
        clientAddress(request({ "x-forwarded-for": "203.0.113.9" }), 2),
        "fewer entries than trusted proxies: the peer",
      ).to.equal("192.0.2.7");
      expect(clientAddress(request({}), 1), "no header: the peer").to.equal("192.0.2.7");
    });
  });
});

describe("live streams at the edge", () => {
  const feed = { offersEventStream: true };
  const page = { offersEventStream: false };

  it("are asked for by naming text/event-stream in Accept — not by the words anywhere in it", () => {
    expect(wantsEventStream(feed, "text/event-stream")).to.equal(true);
    expect(wantsEventStream(feed, "application/json, Text/Event-Stream;q=0.5")).to.equal(true);
    expect(wantsEventStream(feed, ["application/json", "text/event-stream"])).to.equal(true);
    expect(wantsEventStream(feed, "text/event-stream;q=0"), "q=0 refuses it").to.equal(false);
    expect(wantsEventStream(feed, "application/json;x=text/event-stream"), "a parameter that mentions it").to.equal(
      false,
    );
    expect(wantsEventStream(feed, "*/*")).to.equal(false);
    expect(wantsEventStream(feed, "text/event-streams")).to.equal(false);
    expect(wantsEventStream(feed, undefined)).to.equal(false);
    expect(wantsEventStream(page, "text/event-stream"), "an operation without a stream").to.equal(false);
  });

  it("are counted per caller, up to the maximum, and a slot comes back once", () => {
    const slots = new StreamSlots(2);
    const a = slots.take("user:acme:2")!;
    const b = slots.take("user:acme:2")!;
    expect(slots.take("user:acme:2"), "a third one").to.equal(undefined);
    expect(slots.take("user:acme:3"), "another caller has slots of their own").to.not.equal(undefined);
    a();
    a();
    expect(slots.size).to.equal(2);
    expect(slots.take("user:acme:2")).to.not.equal(undefined);
    b();
  });
});
