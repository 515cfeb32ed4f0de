// Stage parameters and body: the request's input checked against its operation of the v1 and v2 documents.
import { expect } from "chai";
import { bodyStage, IGNORED_QUERY_PARAMETERS, readParams, takesBody } from "../../src/pipeline/input.js";
import type { ApiExchange } from "../../src/pipeline/api-exchange.js";
import { HttpError } from "../../src/runtime/errors.js";
import { loadApiDocument, servedApiPath } from "../../src/runtime/openapi.js";
import { Router } from "../../src/runtime/router.js";
import { exchange } from "./fixtures.js";

describe("pipeline: parameters and body", () => {
  const documents = [1, 2].map((major) => loadApiDocument(servedApiPath(major)));
  const router = new Router(documents.flatMap((d) => d.operations));
  const readBody = bodyStage(1_024);
  /** An exchange routed as the route stage would (route.test.ts tests that stage). */
  function routed(path: string, options: Parameters<typeof exchange>[1] = {}): ApiExchange {
    const x = exchange(path, options);
    const match = router.match(x.method, x.pathname);
    x.operation = match.operation;
    x.pathParams = match.pathParams;
    return x;
  }
  const refusal = async (work: () => unknown): Promise<HttpError> => {
    try {
      await work();
    } catch (err) {
      if (err instanceof HttpError) return err;
      throw err;
    }
    throw new Error("not refused");
  };

  describe("parameters", () => {
    it("takes path and query parameters, integers as numbers", () => {
      const x = routed("/v1/payments?limit=5&cursor=abc");
      readParams(x);
      expect(x.params).to.deep.equal({ limit: 5, cursor: "abc" });
      expect(x.headers).not.to.have.property(IGNORED_QUERY_PARAMETERS);
    });

    it("v1 ignores a query parameter its operation does not declare, and names it in X-Ignored-Query-Parameters", () => {
      const x = routed("/v1/payments?limit=5&lmit=6&lmit=7&a%2Cb=1&x%0D%0Ay=2");
      readParams(x);
      expect(x.params).to.deep.equal({ limit: 5 });
      expect(x.headers[IGNORED_QUERY_PARAMETERS]).to.equal("lmit, a%2Cb, x%0D%0Ay");
    });

    it("v1 says so in its document, as it always did: refusing them would tighten v1 (contract §9)", () => {
      const [v1, v2] = documents;
      expect(new Set(v1!.operations.map((o) => o.unknownQueryParameters))).to.deep.equal(new Set(["ignored"]));
      expect(new Set(v2!.operations.map((o) => o.unknownQueryParameters))).to.deep.equal(new Set(["refused"]));
    });

    it("v2 refuses it on every route with 400, naming it and what the route takes", async () => {
      for (const operation of documents[1]!.operations) {
        const path = operation.pathTemplate.replace(/\{\w+\}/g, "1");
        const x = exchange(`${path}?lmit=5`, { method: operation.method });
        x.operation = operation;
        x.pathParams = router.match(operation.method, path).pathParams;
        const err = await refusal(() => readParams(x));
        const where = `${operation.method} ${operation.pathTemplate}`;
        expect([err.status, err.code], where).to.deep.equal([400, "INVALID_REQUEST"]);
        expect(err.message, where).to.equal(
          operation.queryParams.includes("limit")
            ? "unknown query parameter lmit (did you mean limit?)"
            : operation.queryParams.length === 0
              ? "unknown query parameter lmit: this route takes no query parameters"
              : `unknown query parameter lmit: this route takes ${operation.queryParams.join(", ")}`,
        );
      }
    });

    it("takes the operation's header parameters", () => {
      const key = "0b7f1f0e-2d6c-4c7e-9a4b-6f0f5e1d2c3b";
      const x = routed("/v1/payments", { method: "POST", headers: { "idempotency-key": key } });
      readParams(x);
      expect(x.params["idempotency-key"]).to.equal(key);
    });

    it("refuses a query parameter given twice with 400", async () => {
      const err = await refusal(() => readParams(routed("/v1/payments?limit=5&limit=6")));
      expect(err.status).to.equal(400);
      expect(err.message).to.equal("query parameter limit is given more than once");
    });

    for (const bad of ["0x10", "1e2", "+5", "05", "5.0", "Infinity"]) {
      it(`refuses the integer "${bad}" with 400: integers are plain decimals`, async () => {
        const err = await refusal(() => readParams(routed(`/v1/payments?limit=${encodeURIComponent(bad)}`)));
        expect(err.status).to.equal(400);
        expect(err.message).to.equal("limit must be a whole number written in decimal digits");
      });
    }

    it("refuses a parameter the document's schema does not allow with 400", async () => {
      const err = await refusal(() => readParams(routed("/v1/payments?limit=1000")));
      expect(err.status).to.equal(400);
      expect(err.code).to.equal("INVALID_REQUEST");
    });
  });

  describe("body", () => {
    const json = { "content-type": "application/json" };

    it("reads a body where the operation takes one and it is required or sent; never where it takes none", () => {
      expect(takesBody(routed("/v1/payments", { method: "POST" })), "required").to.equal(true);
      expect(
        takesBody(routed("/v1/payments/pay_1", { headers: { "content-length": "10" } })),
        "GET takes none",
      ).to.equal(false);
    });

    it("reads and checks a JSON body", async () => {
      const x = routed("/v1/payments", {
        method: "POST",
        headers: json,
        body: '{"amount":100,"currency":"EUR","source":"tok_visa"}',
      });
      await readBody(x);
      expect(x.body).to.deep.equal({ amount: 100, currency: "EUR", source: "tok_visa" });
      expect(x.lines).to.equal(undefined);
    });

    it("refuses a body of the wrong shape with 400 and wrong values with 422", async () => {
      const shape = await refusal(() =>
        readBody(routed("/v1/payments", { method: "POST", headers: json, body: '{"amount":100}' })),
      );
      expect([shape.status, shape.code]).to.deep.equal([400, "INVALID_REQUEST"]);
      const body = '{"amount":0,"currency":"EUR","source":"tok_visa"}';
      const values = await refusal(() => readBody(routed("/v1/payments", { method: "POST", headers: json, body })));
      expect([values.status, values.code]).to.deep.equal([422, "RULE_VIOLATION"]);
    });

    it("names an unknown field before a missing one, with the field it most likely meant", async () => {
      for (const path of ["/v1/payments", "/v2/payments"]) {
        const body = '{"ammount":5,"currency":"EUR","source":"tok_x"}';
        const err = await refusal(() => readBody(routed(path, { method: "POST", headers: json, body })));
        expect([err.status, err.code, err.message]).to.deep.equal([
          400,
          "INVALID_REQUEST",
          "unknown field ammount (did you mean amount?)",
        ]);
      }
      const item = '{"currency":"EUR","items":[{"sku":"BOOK-1","quantty":1}]}';
      const nested = await refusal(() => readBody(routed("/v1/orders", { method: "POST", headers: json, body: item })));
      expect(nested.message).to.equal("unknown field items.0.quantty (did you mean quantity?)");
      const unlike = '{"amount":5,"currency":"EUR","source":"tok_x","colour":"red"}';
      const plain = await refusal(() =>
        readBody(routed("/v1/payments", { method: "POST", headers: json, body: unlike })),
      );
      expect(plain.message, "no suggestion when nothing is close").to.equal("unknown field colour");
    });

    it("refuses a body past the limit with 413 and another media type with 415", async () => {
      const big = routed("/v1/payments", {
        method: "POST",
        headers: { ...json, "content-length": "5000" },
        body: "x".repeat(5_000),
      });
      expect((await refusal(() => readBody(big))).status).to.equal(413);
      const text = routed("/v1/payments", { method: "POST", headers: { "content-type": "text/plain" }, body: "hi" });
      expect((await refusal(() => readBody(text))).status).to.equal(415);
    });

    it("checks an import line by line: a bad line is that line's problem, not the request's", async () => {
      const ndjson = '{"sku":"SKU-1","name":"One","price":100,"currency":"EUR"}\nnot json\n{"sku":"SKU-2"}\n';
      const x = routed("/v1/catalog/imports", {
        method: "POST",
        headers: { "content-type": "application/x-ndjson" },
        body: ndjson,
      });
      await readBody(x);
      expect(x.lines?.map((l) => [l.line, l.problem?.status ?? "ok"])).to.deep.equal([
        [1, "ok"],
        [2, 400],
        [3, 400],
      ]);
      expect(x.lines?.[0]?.value).to.deep.equal({ sku: "SKU-1", name: "One", price: 100, currency: "EUR" });
    });
  });
});
