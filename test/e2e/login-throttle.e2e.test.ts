// Login throttling through the real mesh: after 5 failed logins for an account from one address, its
// attempts from there — the right password too — get 429 LOGIN_THROTTLED with Retry-After, exactly as
// for an account that does not exist; from elsewhere only once the account has failed 20 times, and
// never from an address it signed in from before. An address failing across many accounts is refused
// as well (through /v1 or the browser proxy, /rpc); others are not affected. The gateway trusts one
// proxy hop here, so each test is its own client address.
import { expect } from "chai";
import { randomUUID } from "node:crypto";
import { DEMO_PASSWORD, expectError, startE2eMesh, type E2eMesh } from "../support/http.js";
import { forgetRedisKeys } from "../support/redis-keys.js";

describe("e2e: login throttling", function () {
  this.timeout(60_000);
  let env: E2eMesh;
  const throttlePrefix = `switchyard:test:login-throttle:${randomUUID()}:login`;

  before(async function () {
    this.timeout(120_000);
    env = await startE2eMesh("login-throttle", {
      env: { LOGIN_FAILURES_ALLOWED: "5", LOGIN_BLOCK_SECONDS: "30", LOGIN_THROTTLE_PREFIX: throttlePrefix },
      envFor: { gateway: { GATEWAY_TRUSTED_PROXY_HOPS: "1" } },
    });
  });
  after(async () => {
    await env?.stop();
    // Known addresses would stay 30 days in a shared Redis.
    if (process.env.REDIS_URL) await forgetRedisKeys(process.env.REDIS_URL, [throttlePrefix]);
  });

  const login = (tenant: string, email: string, password: string, address: string) =>
    env.api.post(`/v1/tenants/${tenant}/sessions`, {
      json: { email, password },
      headers: { "x-forwarded-for": address },
    });

  async function failFiveTimes(tenant: string, email: string, address: string): Promise<void> {
    for (let i = 0; i < 5; i++)
      expectError(await login(tenant, email, `wrong-password-${i}`, address), 401, "INVALID_CREDENTIALS");
  }

  function expectThrottled(res: Awaited<ReturnType<typeof login>>): number {
    expectError(res, 429, "LOGIN_THROTTLED");
    const wait = Number(res.headers.get("retry-after"));
    expect(wait, "Retry-After").to.be.within(1, 30);
    expect(res.json.error).to.match(/too many failed logins/);
    return wait;
  }

  it("refuses an account at an address after 5 failures there, the right password included; elsewhere after 20, but not where it signed in", async () => {
    await failFiveTimes("acme", "alice@acme.test", "192.0.2.40");
    expectThrottled(await login("acme", "alice@acme.test", DEMO_PASSWORD, "192.0.2.40"));
    expect((await login("acme", "alice@acme.test", DEMO_PASSWORD, "192.0.2.41")).status, "another address").to.equal(
      201,
    );
    for (const address of ["192.0.2.47", "192.0.2.48", "192.0.2.49"])
      await failFiveTimes("acme", "alice@acme.test", address);
    expectThrottled(await login("acme", "alice@acme.test", DEMO_PASSWORD, "192.0.2.50"));
    expect(
      (await login("acme", "alice@acme.test", DEMO_PASSWORD, "192.0.2.41")).status,
      "the address alice signed in from",
    ).to.equal(201);
    // Another account is not affected.
    expect((await login("acme", "bob@acme.test", DEMO_PASSWORD, "192.0.2.50")).status).to.equal(201);
  });

  it("answers an account that does not exist exactly alike", async () => {
    await failFiveTimes("acme", "nobody@acme.test", "192.0.2.42");
    const res = await login("acme", "nobody@acme.test", DEMO_PASSWORD, "192.0.2.42");
    expectThrottled(res);
    await failFiveTimes("acme", "bob@acme.test", "192.0.2.42");
    const existing = await login("acme", "bob@acme.test", DEMO_PASSWORD, "192.0.2.42");
    expectThrottled(existing);
    expect(existing.status).to.equal(res.status);
    expect(existing.json.code).to.equal(res.json.code);
    expect(Object.keys(existing.json).sort()).to.deep.equal(Object.keys(res.json).sort());
  });

  it("refuses an address that fails across many accounts, and only that address", async () => {
    for (let i = 0; i < 20; i++)
      expectError(
        await login("globex", `guess-${i}@globex.test`, "wrong-password", "192.0.2.43"),
        401,
        "INVALID_CREDENTIALS",
      );
    expectThrottled(await login("globex", "carol@globex.test", DEMO_PASSWORD, "192.0.2.43"));
    expect((await login("globex", "carol@globex.test", DEMO_PASSWORD, "192.0.2.44")).status).to.equal(201);
  });

  it("counts a browser's failed logins through /rpc by its address too", async () => {
    const rpcLogin = (email: string) =>
      env.api.post("/rpc/switchyard.identity.v1.IdentityService/CreateSession", {
        json: { tenantId: "globex", email, password: "wrong-password" },
        headers: { "x-forwarded-for": "192.0.2.45" },
      });
    for (let i = 0; i < 20; i++) {
      const res = await rpcLogin(`browser-guess-${i}@globex.test`);
      expect(res.status, "a wrong password through /rpc").to.equal(401);
    }
    expectThrottled(await login("globex", "carol@globex.test", DEMO_PASSWORD, "192.0.2.45"));
    expect((await login("globex", "carol@globex.test", DEMO_PASSWORD, "192.0.2.46")).status).to.equal(201);
  });
});
