// Rate limits at the edge (contract §8): the quota headers on every /v1 answer, 429 with
// Retry-After past the quota, a quota per verified user (made-up tokens buy none: they draw on their
// address's, and get 401 at the gateway) and per client address — the one the trusted proxy saw, not
// what the client wrote — and, with Redis, one quota shared by two gateway processes.
import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { ALICE, Api, expectError, startE2eMesh, type E2eMesh } from "../support/http.js";

const LIMIT = 6;

describe("e2e: rate limits", function () {
  this.timeout(120_000);
  let env: E2eMesh;
  let api: Api;
  const prefix = `switchyard:test:${randomBytes(4).toString("hex")}`;
  // Behind one trusted proxy the client address is the rightmost X-Forwarded-For entry: each test is its own client.
  const limits = {
    GATEWAY_RATE_LIMIT: String(LIMIT),
    GATEWAY_RATE_WINDOW_SECONDS: "60",
    GATEWAY_RATE_LIMIT_PREFIX: prefix,
    GATEWAY_TRUSTED_PROXY_HOPS: "1",
  };
  const loginFrom = async (base: string, address: string, who: { tenant: string; email: string }) => {
    const res = await fetch(`${base}/v1/tenants/${who.tenant}/sessions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-forwarded-for": address },
      body: JSON.stringify({ email: who.email, password: "demo-password" }),
    });
    expect(res.status).to.equal(201);
    return ((await res.json()) as { access_token: string }).access_token;
  };

  before(async () => {
    // With Redis, a second gateway shares the quotas (the shared-quota suite below).
    env = await startE2eMesh("rate-limit", {
      envFor: { gateway: limits },
      replicas: { gateway: process.env.REDIS_URL ? 2 : 1 },
    });
    api = new Api(env.mesh.gatewayUrl);
  });
  after(async () => env?.stop());

  it("counts a user's quota down on every answer, then answers 429 with Retry-After and the JSON error", async () => {
    const token = await loginFrom(env.mesh.gatewayUrl, "192.0.2.1", ALICE);
    const remaining: number[] = [];
    for (let i = 0; i < LIMIT; i++) {
      const res = await api.get("/v1/payments?limit=1", { token });
      expect(res.status, res.text).to.equal(200);
      expect(res.headers.get("x-ratelimit-limit")).to.equal(String(LIMIT));
      const reset = Number(res.headers.get("x-ratelimit-reset"));
      expect(reset).to.be.within(Date.now() / 1000, Date.now() / 1000 + 61);
      remaining.push(Number(res.headers.get("x-ratelimit-remaining")));
    }
    expect(remaining).to.deep.equal([5, 4, 3, 2, 1, 0]);
    const limited = await api.get("/v1/payments?limit=1", { token });
    expectError(limited, 429, "RATE_LIMITED");
    expect(limited.headers.get("x-ratelimit-remaining")).to.equal("0");
    expect(Number(limited.headers.get("retry-after"))).to.be.within(1, 60);
    // Errors carry the quota too, and a 429 does not reach the services.
    expectError(await api.post("/v1/payments", { token, json: {} }), 429, "RATE_LIMITED");
  });

  it("keeps anonymous clients (by address) apart from each other and from credentials", async () => {
    const from = (address: string) => api.get("/v1/catalog/items", { headers: { "x-forwarded-for": address } });
    // The login above drew one request from 192.0.2.1's anonymous quota.
    const statuses: number[] = [];
    for (let i = 0; i < LIMIT; i++) statuses.push((await from("192.0.2.1")).status);
    expect(statuses.filter((s) => s === 200)).to.have.length(LIMIT - 1);
    expect(statuses[LIMIT - 1]).to.equal(429);
    expect((await from("192.0.2.2")).status, "another address has its own quota").to.equal(200);
    expect((await api.get("/healthz")).status, "health checks are not rate limited").to.equal(200);
  });

  it("draws on the quota for refused routes and versions too, and answers 429 before them once it is used up", async () => {
    const from = (path: string, headers: Record<string, string> = {}) =>
      api.get(path, { headers: { "x-forwarded-for": "192.0.2.40", ...headers } });
    const unknown = await from("/v1/no-such-route");
    expectError(unknown, 404, "ROUTE_NOT_FOUND");
    expect(unknown.headers.get("x-ratelimit-remaining")).to.equal(String(LIMIT - 1));
    const version = await from("/v1/catalog/items", { accept: "application/vnd.api.v9+json" });
    expectError(version, 406, "NOT_ACCEPTABLE");
    expect(version.headers.get("x-ratelimit-remaining")).to.equal(String(LIMIT - 2));
    for (let i = 2; i < LIMIT; i++) await from("/v1/openapi.json");
    expectError(await from("/v1/no-such-route"), 429, "RATE_LIMITED");
  });

  it("draws every token of one user on one quota", async () => {
    const first = await loginFrom(env.mesh.gatewayUrl, "192.0.2.10", { tenant: "acme", email: "bob@acme.test" });
    const second = await loginFrom(env.mesh.gatewayUrl, "192.0.2.11", { tenant: "acme", email: "bob@acme.test" });
    expect(second).to.not.equal(first);
    const answers: string[] = [];
    for (let i = 0; i < LIMIT + 1; i++) {
      const res = await api.get("/v1/payments?limit=1", { token: i % 2 === 0 ? first : second });
      answers.push(`${res.status}:${res.headers.get("x-ratelimit-remaining")}`);
    }
    expect(answers).to.deep.equal(["200:5", "200:4", "200:3", "200:2", "200:1", "200:0", "429:0"]);
  });

  it("gives made-up tokens no quota of their own: each draws on its address's and is answered 401 at the gateway", async () => {
    const junk = () =>
      `${randomBytes(12).toString("base64url")}.${randomBytes(24).toString("base64url")}.${randomBytes(32).toString("base64url")}`;
    const statuses: number[] = [];
    for (let i = 0; i < LIMIT + 2; i++) {
      const res = await fetch(`${env.mesh.gatewayUrl}/v1/payments`, {
        headers: { authorization: `Bearer ${junk()}`, "x-forwarded-for": "192.0.2.20" },
      });
      statuses.push(res.status);
      if (res.status === 401) expect(res.headers.get("www-authenticate")).to.match(/^Bearer .*error="invalid_token"/);
    }
    expect(statuses).to.deep.equal([...Array(LIMIT).fill(401), 429, 429]);
    // Password guessing with a fresh made-up token each time draws on the same address quota.
    const guess = await fetch(`${env.mesh.gatewayUrl}/v1/tenants/acme/sessions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${junk()}`,
        "content-type": "application/json",
        "x-forwarded-for": "192.0.2.20",
      },
      body: JSON.stringify({ email: "alice@acme.test", password: "guess" }),
    });
    expect(guess.status).to.equal(429);
  });

  it("takes the address the trusted proxy saw (the rightmost X-Forwarded-For entry), never what the client wrote left of it", async () => {
    const from = (forwarded: string) => api.get("/v1/catalog/items", { headers: { "x-forwarded-for": forwarded } });
    const statuses: number[] = [];
    for (let i = 0; i < LIMIT + 1; i++) statuses.push((await from(`198.51.100.${i}, 192.0.2.30`)).status);
    expect(statuses, "a new left entry each time buys nothing").to.deep.equal([...Array(LIMIT).fill(200), 429]);
    expect((await from("192.0.2.30, 192.0.2.31")).status, "the address the proxy saw is another one").to.equal(200);
  });

  describe("two gateway processes sharing one Redis quota", () => {
    let secondUrl = "";
    before(function () {
      if (!process.env.REDIS_URL) {
        console.log("  (shared-quota suite skipped: REDIS_URL is not set)");
        this.skip();
      }
      secondUrl = `http://127.0.0.1:${env.mesh.replicaPorts.gateway[1]}`;
    });

    it("lets a credential make LIMIT requests in all, whichever gateway it asks", async () => {
      const first = new Api(env.mesh.gatewayUrl);
      const other = new Api(secondUrl);
      const token = await loginFrom(env.mesh.gatewayUrl, "192.0.2.3", { tenant: "globex", email: "carol@globex.test" });
      const answers: string[] = [];
      for (let i = 0; i < LIMIT + 2; i++) {
        const res = await (i % 2 === 0 ? first : other).get("/v1/payments?limit=1", { token });
        answers.push(`${res.status}:${res.headers.get("x-ratelimit-remaining")}`);
      }
      expect(answers).to.deep.equal(["200:5", "200:4", "200:3", "200:2", "200:1", "200:0", "429:0", "429:0"]);
    });
  });
});
