// Stage route and version: the operation of the documents that answers, the version negotiated, and a
// deprecated route's headers and usage — over the real v1 and v2 documents.
import { expect } from "chai";
import { createLogger } from "@switchyard/platform/logger.js";
import { routeStage } from "../../src/pipeline/route.js";
import { HttpError } from "../../src/runtime/errors.js";
import { loadApiDocument, representationsOf, servedApiPath } from "../../src/runtime/openapi.js";
import { Router } from "../../src/runtime/router.js";
import { DeprecatedRouteUsage, deprecatedOperations, publishedVersions } from "../../src/runtime/versions.js";
import { bindRoutes } from "../../src/routes/table.js";
import { caller, exchange } from "./fixtures.js";

describe("pipeline: route and version", () => {
  const versions = publishedVersions(new Date("2027-08-23T00:00:00Z"));
  const apis = new Map(versions.map((v) => [v.major, loadApiDocument(servedApiPath(v.major))]));
  const operations = [...apis.values()].flatMap((a) => a.operations);
  const usage: { tenant: string; route: string; verified: boolean }[] = [];
  const deprecatedUsage = new DeprecatedRouteUsage(createLogger("test", "silent"), 60_000);
  deprecatedUsage.count = (tenant, route, verified = true) => void usage.push({ tenant, route, verified });
  const routeAndVersion = routeStage({
    router: new Router(operations),
    routes: bindRoutes(operations),
    publishedMajors: versions.map((v) => v.major),
    deprecations: deprecatedOperations(versions, (major) => representationsOf(apis.get(major)!)),
    deprecatedUsage,
  });
  after(() => deprecatedUsage.stop());
  beforeEach(() => (usage.length = 0));

  it("finds the operation, its path parameters, route template, handler and upstream; answers vary by Accept", () => {
    const x = exchange("/v1/payments/pay_1");
    expect(routeAndVersion(x)).to.equal(undefined);
    expect(x.operation.operationId).to.equal("getPayment");
    expect(x.pathParams).to.deep.equal({ payment_id: "pay_1" });
    expect(x.record.route).to.equal("/v1/payments/{payment_id}");
    expect([x.pathMajor, x.version]).to.deep.equal([1, 1]);
    expect(x.route?.upstream).to.equal("payments");
    expect(x.upstream).to.equal("payments");
    expect(x.headers.vary).to.equal("Accept");
    expect(x.headers).to.not.have.property("content-type");
    expect(x.headers).to.not.have.property("deprecation");
  });

  it("returns 404 for an unknown path and 405 with Allow for another method, without a route to call", () => {
    const unknown = exchange("/v1/nothing-here");
    const notFound = routeAndVersion(unknown) as HttpError;
    expect(notFound).to.be.instanceOf(HttpError);
    expect(notFound.status).to.equal(404);
    expect(unknown.route).to.equal(undefined);
    expect(unknown.upstream).to.equal("upstream");
    const wrongMethod = exchange("/v1/payments/pay_1", { method: "DELETE" });
    const notAllowed = routeAndVersion(wrongMethod) as HttpError;
    expect(notAllowed.status).to.equal(405);
    expect(notAllowed.headers.allow).to.be.a("string");
  });

  it("answers the version a vendor media type asks for on a v1 path, with that media type", () => {
    const x = exchange("/v1/tenants/acme/users/1", { headers: { accept: "application/vnd.api.v2+json" } });
    expect(routeAndVersion(x)).to.equal(undefined);
    expect([x.pathMajor, x.version]).to.deep.equal([1, 2]);
    expect(x.operation.pathTemplate.startsWith("/v2/")).to.equal(true);
    expect(x.headers["content-type"]).to.equal("application/vnd.api.v2+json; charset=utf-8");
    expect(x.headers, "v2's representation is not deprecated").to.not.have.property("deprecation");
  });

  it("returns 406 for a version that is not published, once the route is known (it is in the access record)", () => {
    const x = exchange("/v1/payments/pay_1", { headers: { accept: "application/vnd.api.v9+json" } });
    const refusal = routeAndVersion(x) as HttpError;
    expect(refusal.status).to.equal(406);
    expect(x.record.route).to.equal("/v1/payments/{payment_id}");
  });

  it("marks a deprecated route with Deprecation, Sunset and its successor, and counts its use by the caller's tenant", () => {
    const x = exchange("/v1/tenants/acme/users/1");
    x.caller = caller("globex", 3n);
    expect(routeAndVersion(x)).to.equal(undefined);
    expect(x.headers.deprecation).to.match(/^@\d+$/);
    expect(x.headers.sunset).to.equal("Mon, 23 Aug 2027 00:00:00 GMT");
    expect(x.headers.link).to.include('</v2/tenants/acme/users/1>; rel="successor-version"');
    expect(usage).to.deep.equal([
      { tenant: "globex", route: "GET /v1/tenants/{tenant_id}/users/{user_id}", verified: true },
    ]);
  });

  it("counts a deprecated route used without a token by the path's tenant, as unverified", () => {
    expect(routeAndVersion(exchange("/v1/tenants/acme/users/1"))).to.equal(undefined);
    expect(usage).to.deep.equal([
      { tenant: "acme", route: "GET /v1/tenants/{tenant_id}/users/{user_id}", verified: false },
    ]);
  });

  it("leaves the OpenAPI document without a handler: the edge answers it itself", () => {
    const x = exchange("/v2/openapi.json");
    expect(routeAndVersion(x)).to.equal(undefined);
    expect(x.operation.operationId).to.equal("getOpenApiDocument");
    expect(x.route).to.equal(undefined);
  });
});
