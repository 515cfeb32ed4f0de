// The gateway's runtime pieces on their own: document ↔ handlers, the error table, the router, quota keys.
import { expect } from "chai";
import type { IncomingMessage } from "node:http";
import { Code, ConnectError } from "@connectrpc/connect";
import { errorCatalogue, fail } from "@switchyard/platform";
import { bindRoutes } from "../src/gateway.js";
import { toHttpError, HttpError } from "../src/runtime/errors.js";
import { loadApiDocument } from "../src/runtime/openapi.js";
import { quotaKey } from "../src/runtime/rate-limit.js";
import { Router } from "../src/runtime/router.js";

const api = loadApiDocument();

describe("gateway runtime", () => {
  describe("the OpenAPI document", () => {
    it("has exactly one handler per operation, and no handler without an operation", () => {
      expect(() => bindRoutes(api.operations)).to.not.throw();
      const extra = { upstream: "x", handlers: { notInTheDocument: async () => ({ status: 200 }) } };
      expect(() => bindRoutes(api.operations, [extra])).to.throw(/disagree/);
    });

    it("documents every error code the catalogue can answer with, and no other", () => {
      const documented = ((api.document.components as Record<string, Record<string, { enum: string[] }>>).schemas!.ErrorCode!.enum).slice().sort();
      expect(documented).to.deep.equal(Object.keys(errorCatalogue).sort());
    });

    it("states its paths without verbs, under /v1", () => {
      for (const op of api.operations) {
        expect(op.pathTemplate).to.match(/^\/v1\//);
        for (const segment of op.pathTemplate.split("/")) expect(segment).to.not.match(/^(create|get|delete|update|list|add|remove|do)([A-Z_-]|$)/);
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
      expect(toHttpError(new ConnectError("pg: password authentication failed", Code.Internal)).message).to.equal("internal error");
      expect(toHttpError(new ConnectError("connect ECONNREFUSED 10.0.0.1", Code.Unavailable), "payments").message).to.equal("the payments service is unavailable");
      expect(toHttpError(fail("LOAD_SHED", "busy")).headers).to.have.property("retry-after");
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
      const unknown = (() => { try { router.match("GET", "/v1/nope"); } catch (e) { return e as HttpError; } })();
      expect(unknown?.status).to.equal(404);
      const method = (() => { try { router.match("PUT", "/v1/payments"); } catch (e) { return e as HttpError; } })();
      expect(method?.status).to.equal(405);
      expect(method?.headers.allow?.split(", ").sort()).to.deep.equal(["GET", "HEAD", "POST"]);
    });
  });

  describe("quota keys", () => {
    const request = (headers: Record<string, string>, remoteAddress = "192.0.2.7") => ({ headers, socket: { remoteAddress } }) as unknown as IncomingMessage;

    it("draw one quota per credential (a hash, never the token) and per address when anonymous", () => {
      const alice = quotaKey(request({ authorization: "Bearer token-of-alice" }), false);
      expect(alice).to.match(/^cred:[A-Za-z0-9_-]{32}$/);
      expect(alice).to.not.include("token-of-alice");
      expect(quotaKey(request({ authorization: "Bearer token-of-alice" }, "198.51.100.1"), false), "same credential, other address").to.equal(alice);
      expect(quotaKey(request({ authorization: "Bearer token-of-bob" }), false)).to.not.equal(alice);
      expect(quotaKey(request({}), false)).to.equal("addr:192.0.2.7");
      expect(quotaKey(request({ "x-forwarded-for": "203.0.113.9, 10.0.0.1" }), true)).to.equal("addr:203.0.113.9");
      expect(quotaKey(request({ "x-forwarded-for": "203.0.113.9" }), false), "X-Forwarded-For only behind a trusted proxy").to.equal("addr:192.0.2.7");
    });

    it("stay the same when many other credentials came by meanwhile (the kept hashes are bounded)", () => {
      const first = quotaKey(request({ authorization: "Bearer first" }), false);
      const others = new Set<string>();
      for (let i = 0; i < 10_000; i++) others.add(quotaKey(request({ authorization: `Bearer other-${i}` }), false));
      expect(others.size, "every credential its own key").to.equal(10_000);
      expect(others.has(first)).to.equal(false);
      expect(quotaKey(request({ authorization: "Bearer first" }), false)).to.equal(first);
    });
  });
});
