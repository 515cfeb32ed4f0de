// Versions as the contract describes them (§9), through the real mesh: v2 beside v1 by path, by media
// type on the same paths, deprecation announced on the v1 routes whose representation changed, usage
// of them counted per tenant and route in the gateway's log, and the published versions listed.
import { expect } from "chai";
import { setTimeout as sleep } from "node:timers/promises";
import { ALICE, expectError, startE2eMesh, unique, type E2eMesh } from "../support/http.js";

const V2 = "application/vnd.api.v2+json";

describe("e2e: API versions", function () {
  this.timeout(60_000);
  let env: E2eMesh;
  let token = "";
  let aliceId = 0;

  before(async () => {
    env = await startE2eMesh("versions", {
      envFor: { gateway: { GATEWAY_DEPRECATION_LOG_INTERVAL_MS: "300", GATEWAY_V1_SUNSET: "2027-08-01" } },
    });
    token = await env.api.login(ALICE);
    const me = (await env.api.get("/v1/tenants/acme/users?limit=100", { token })).json.items as {
      id: number;
      email: string;
    }[];
    aliceId = me.find((u) => u.email === ALICE.email)!.id;
  });
  after(async () => env?.stop());

  it("serves v2 by path: a user has name {given, family} instead of full_name; v1 keeps full_name", async () => {
    const v2 = await env.api.get(`/v2/tenants/acme/users/${aliceId}`, { token });
    expect(v2.status, v2.text).to.equal(200);
    expect(v2.json).to.include.keys("id", "email", "name", "role", "created_at");
    expect(v2.json).not.to.have.property("full_name");
    expect(v2.json.name).to.deep.equal({ given: "Alice", family: "Example" });
    expect(v2.headers.get("deprecation"), "v2 is current").to.equal(null);
    const v1 = await env.api.get(`/v1/tenants/acme/users/${aliceId}`, { token });
    expect(v1.json.full_name).to.equal("Alice Example");
    expect(v1.json).not.to.have.property("name");
  });

  it("announces the deprecation on v1's changed routes: Deprecation (RFC 9745), Sunset (RFC 8594), Link to the successor and to /versions", async () => {
    const v1 = await env.api.get(`/v1/tenants/acme/users/${aliceId}`, { token });
    expect(v1.headers.get("deprecation")).to.equal(`@${Date.UTC(2026, 10, 23) / 1000}`);
    expect(v1.headers.get("sunset")).to.equal("Sun, 01 Aug 2027 00:00:00 GMT");
    const link = v1.headers.get("link") ?? "";
    expect(link).to.include(`</v2/tenants/acme/users/${aliceId}>; rel="successor-version"`);
    expect(link).to.include('</versions>; rel="deprecation"');
    // A route whose representation did not change is not deprecated, and is the same under /v2.
    const payments1 = await env.api.get("/v1/payments?limit=5", { token });
    const payments2 = await env.api.get("/v2/payments?limit=5", { token });
    expect(payments1.headers.get("deprecation")).to.equal(null);
    expect(payments2.status).to.equal(200);
    expect(payments2.json.items).to.deep.equal(payments1.json.items);
  });

  it("serves v2 by media type on the v1 path: that Content-Type, Vary: Accept, no deprecation", async () => {
    const res = await env.api.get(`/v1/tenants/acme/users/${aliceId}`, { token, headers: { accept: V2 } });
    expect(res.status, res.text).to.equal(200);
    expect(res.headers.get("content-type")).to.match(/^application\/vnd\.api\.v2\+json/);
    expect(res.headers.get("vary")).to.match(/accept/i);
    expect(res.headers.get("deprecation")).to.equal(null);
    expect(res.json.name).to.deep.equal({ given: "Alice", family: "Example" });
    const plain = await env.api.get(`/v1/tenants/acme/users/${aliceId}`, { token });
    expect(plain.headers.get("content-type")).to.match(/^application\/json/);
    expect(plain.headers.get("vary")).to.match(/accept/i);
  });

  it("refuses a version that is not published with 406, naming the published ones; plain JSON beside it is a fallback", async () => {
    for (const accept of ["application/vnd.api.v9+json", "application/vnd.api.vX+json", "application/vnd.api+json"]) {
      const res = await env.api.get(`/v1/tenants/acme/users/${aliceId}`, { token, headers: { accept } });
      expectError(res, 406, "NOT_ACCEPTABLE");
      expect(res.json.details.published).to.equal("application/vnd.api.v1+json, application/vnd.api.v2+json");
    }
    const fallback = await env.api.get(`/v1/tenants/acme/users/${aliceId}`, {
      token,
      headers: { accept: "application/vnd.api.v9+json, application/json;q=0.5" },
    });
    expect(fallback.status).to.equal(200);
    expect(fallback.json).to.have.property("full_name");
    const wrongPath = await env.api.get(`/v2/tenants/acme/users/${aliceId}`, {
      token,
      headers: { accept: "application/vnd.api.v1+json" },
    });
    expectError(wrongPath, 406, "NOT_ACCEPTABLE");
  });

  it("creates a user through v2 with a name in parts (Location on /v2); v1 shows the parts joined", async () => {
    const email = `v2-${unique()}@acme.test`;
    const res = await env.api.post("/v2/tenants/acme/users", {
      token,
      json: { email, name: { given: "Ada", family: "Lovelace" }, password: "a-long-password-1" },
    });
    expect(res.status, res.text).to.equal(201);
    expect(res.headers.get("location")).to.equal(`/v2/tenants/acme/users/${res.json.id}`);
    expect(res.json.name).to.deep.equal({ given: "Ada", family: "Lovelace" });
    const v1 = await env.api.get(`/v1/tenants/acme/users/${res.json.id}`, { token });
    expect(v1.json.full_name).to.equal("Ada Lovelace");
    // v2's body is v2's: a full_name there is an unknown field.
    const old = await env.api.post("/v2/tenants/acme/users", {
      token,
      json: { email: `x-${email}`, full_name: "Old Style", password: "a-long-password-1" },
    });
    expectError(old, 400, "INVALID_REQUEST");
  });

  it("creates a user through v1 with a whole name: v2 shows all of it as the given name", async () => {
    const email = `v1-${unique()}@acme.test`;
    const res = await env.api.post("/v1/tenants/acme/users", {
      token,
      json: { email, full_name: "Grace Brewster Hopper", password: "a-long-password-1" },
    });
    expect(res.status, res.text).to.equal(201);
    expect(res.headers.get("location")).to.equal(`/v1/tenants/acme/users/${res.json.id}`);
    const v2 = await env.api.get(`/v2/tenants/acme/users/${res.json.id}`, { token });
    expect(v2.json.name).to.deep.equal({ given: "Grace Brewster Hopper", family: "" });
  });

  it("reads a v2 body on the v1 path when the media type says v2", async () => {
    const email = `mt-${unique()}@acme.test`;
    const res = await env.api.post("/v1/tenants/acme/users", {
      token,
      json: { email, name: { given: "Alan", family: "Turing" }, password: "a-long-password-1" },
      headers: { accept: V2, "content-type": V2 },
    });
    expect(res.status, res.text).to.equal(201);
    expect(res.headers.get("location"), "named on the path it was asked on").to.equal(
      `/v1/tenants/acme/users/${res.json.id}`,
    );
    expect(res.json.name).to.deep.equal({ given: "Alan", family: "Turing" });
  });

  it("speaks the version that was called: a v2 answer's messages and Locations name v2 paths", async () => {
    const order = await env.api.post("/v2/orders", {
      token,
      json: { currency: "EUR", items: [{ sku: "BOOK-1", quantity: 1 }] },
    });
    expect(order.status, order.text).to.equal(201);
    expect(order.headers.get("location")).to.equal(`/v2/orders/${order.json.id}`);
    for (const major of [2, 1]) {
      const refused = await env.api.request("PATCH", `/v${major}/orders/${order.json.id}`, {
        token,
        json: { status: "paid" },
      });
      expectError(refused, 422, "RULE_VIOLATION");
      for (const action of ["payment", "shipments", "cancel"])
        expect(refused.json.error).to.include(`POST /v${major}/orders/${order.json.id}/${action}`);
      expect(refused.json.error, "no other version's path").not.to.match(new RegExp(`/v(?!${major}/)\\d`));
    }
    const doc = await env.api.post("/v2/docs", { token, json: { title: "Runbook", body: "v2" } });
    expect(doc.status, doc.text).to.equal(201);
    expect(doc.headers.get("location")).to.equal(`/v2/docs/${doc.json.id}`);
    const post = await env.api.post("/v2/posts", { token, json: { title: "Hello", body: "from v2" } });
    expect(post.status, post.text).to.equal(201);
    expect(post.headers.get("location")).to.equal(`/v2/posts/${post.json.id}`);
  });

  it("serves one OpenAPI document per version and lists the published versions at /versions", async () => {
    const v1 = await env.api.get("/v1/openapi.json");
    const v2 = await env.api.get("/v2/openapi.json");
    expect(v1.json.info.version).to.match(/^1\./);
    expect(v2.json.info.version).to.match(/^2\./);
    expect(Object.keys(v2.json.paths).every((p: string) => p.startsWith("/v2/"))).to.equal(true);
    // v2 has every path of v1, and its own since v1's deprecation: the webhook endpoints.
    const v2Paths = Object.keys(v2.json.paths as object);
    expect(
      v2Paths
        .filter((p) => !p.startsWith("/v2/webhook-endpoints"))
        .map((p) => p.replace("/v2/", "/v1/"))
        .sort(),
    ).to.deep.equal(Object.keys(v1.json.paths).sort());
    expect(v2Paths.filter((p) => p.startsWith("/v2/webhook-endpoints"))).to.have.length(6);
    const versions = await env.api.get("/versions");
    expect(versions.status).to.equal(200);
    expect(versions.json.versions).to.deep.equal([
      {
        version: "v1",
        status: "deprecated",
        media_type: "application/vnd.api.v1+json",
        openapi: "/v1/openapi.json",
        docs: "/docs/v1",
        deprecated_at: "2026-11-23T00:00:00.000Z",
        sunset_at: "2027-08-01T00:00:00.000Z",
      },
      {
        version: "v2",
        status: "current",
        media_type: "application/vnd.api.v2+json",
        openapi: "/v2/openapi.json",
        docs: "/docs/v2",
        deprecated_at: null,
        sunset_at: null,
      },
    ]);
  });

  it("counts the use of deprecated routes per tenant and route in the gateway's log", async () => {
    await sleep(700); // earlier tests' counts are logged by now (every 300 ms here)
    const seen = env.mesh.logs.length;
    for (let i = 0; i < 3; i++) await env.api.get(`/v1/tenants/acme/users/${aliceId}`, { token });
    await env.api.get(`/v2/tenants/acme/users/${aliceId}`, { token }); // not deprecated: not counted
    const route = "GET /v1/tenants/{tenant_id}/users/{user_id}";
    const usage = () =>
      env.mesh.logs
        .slice(seen)
        .join("")
        .split("\n")
        .filter((l) => l.includes('"deprecated routes used"'))
        .flatMap((l) => (JSON.parse(l) as { usage: { tenant: string; route: string; count: number }[] }).usage);
    const counted = () =>
      usage()
        .filter((u) => u.tenant === "acme" && u.route === route)
        .reduce((n, u) => n + u.count, 0);
    for (const until = Date.now() + 5_000; counted() < 3 && Date.now() < until;) await sleep(100);
    await sleep(700);
    expect(counted(), "each use counted once, under its tenant and route template").to.equal(3);
    expect(
      usage().some((u) => u.route.startsWith("GET /v2/")),
      "v2 is not deprecated",
    ).to.equal(false);
  });
});
