// Attacks on logins from outside, through the gateway, as issue 33 found them: parallel guesses that
// all passed the throttle's check before any was counted, and a stranger's five failures locking the
// owner out of every address. The gateway trusts one proxy hop here, so X-Forwarded-For is the client
// address. With REDIS_URL and DATABASE_URL, identity runs as two replicas, as deployed: one database
// (its users and signing keys: each replica verifies the gateway's token that vouches for the
// address) and the counts shared through Redis.
import { expect } from "chai";
import { randomBytes, randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { DEMO_PASSWORD, expectError, startE2eMesh, type E2eMesh } from "../../support/http.js";
import { forgetRedisKeys } from "../../support/redis-keys.js";

const ALLOWED = 5;
const GUESSES = 36;

describe("e2e attacks: logins", function () {
  this.timeout(60_000);
  const redisUrl = process.env.REDIS_URL;
  const databaseUrl = process.env.DATABASE_URL;
  const replicated = redisUrl !== undefined && databaseUrl !== undefined;
  const identitySchema = `t_${randomBytes(4).toString("hex")}_identity`;
  let env: E2eMesh;
  const throttlePrefix = `switchyard:test:attacks-logins:${randomUUID()}:login`;

  before(async function () {
    this.timeout(120_000);
    const identityOnServer = {
      DATABASE_URL: databaseUrl,
      IDENTITY_DB_SCHEMA: identitySchema,
      SIGNING_KEY_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
      DEMO_DATA_FORCE: "true",
    };
    env = await startE2eMesh("attacks-logins", {
      env: {
        LOGIN_FAILURES_ALLOWED: String(ALLOWED),
        LOGIN_BLOCK_SECONDS: "30",
        LOGIN_THROTTLE_PREFIX: throttlePrefix,
        ...(redisUrl ? { REDIS_URL: redisUrl } : {}),
      },
      // Every answered call is logged at debug level: which identity replica judged it.
      envFor: {
        gateway: { GATEWAY_TRUSTED_PROXY_HOPS: "1" },
        identity: { LOG_LEVEL: "debug", ...(replicated ? identityOnServer : {}) },
      },
      ...(replicated ? { replicas: { identity: 2 } } : {}),
    });
  });
  after(async () => {
    await env?.stop();
    if (redisUrl) await forgetRedisKeys(redisUrl, [throttlePrefix]);
    if (replicated) {
      const admin = new pg.Client({ connectionString: databaseUrl });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS ${identitySchema} CASCADE`);
      await admin.end();
    }
  });

  const login = (tenant: string, email: string, password: string, address: string) =>
    env.api.post(`/v1/tenants/${tenant}/sessions`, {
      json: { email, password },
      headers: { "x-forwarded-for": address },
    });

  /** GUESSES wrong passwords at once; how many were judged (401) — every other one must be 429. */
  async function guessInParallel(tenant: string, email: string, address: string): Promise<number> {
    const answers = await Promise.all(
      Array.from({ length: GUESSES }, (_, i) => login(tenant, email, `wrong-password-${i}`, address)),
    );
    const statuses = answers.map((res) => res.status);
    for (const res of answers) if (res.status !== 401) expectError(res, 429, "LOGIN_THROTTLED");
    const judged = statuses.filter((s) => s === 401).length;
    expect(judged, `statuses ${statuses.join()}`).to.be.at.most(ALLOWED);
    // A guess refused only because others were being judged just then leaves its place unused:
    // guessing on one at a time uses up the allowance, and no further.
    for (let i = judged; i < ALLOWED; i++)
      expectError(await login(tenant, email, "wrong-password", address), 401, "INVALID_CREDENTIALS");
    return judged;
  }

  it(`judges at most ${ALLOWED} of ${GUESSES} parallel wrong passwords for one account; then the right one from that address is refused`, async () => {
    await guessInParallel("acme", "alice@acme.test", "203.0.113.1");
    expectError(await login("acme", "alice@acme.test", DEMO_PASSWORD, "203.0.113.1"), 429, "LOGIN_THROTTLED");
  });

  it("does not let a stranger's failures lock the owner out, at an address they signed in from or at a new one", async () => {
    const [home, stranger, fresh] = ["203.0.113.10", "203.0.113.11", "203.0.113.12"];
    expect((await login("acme", "bob@acme.test", DEMO_PASSWORD, home)).status, "the owner signs in at home").to.equal(
      201,
    );
    for (let i = 0; i < ALLOWED; i++)
      expectError(await login("acme", "bob@acme.test", `wrong-password-${i}`, stranger), 401, "INVALID_CREDENTIALS");
    expectError(await login("acme", "bob@acme.test", DEMO_PASSWORD, stranger), 429, "LOGIN_THROTTLED");
    expect((await login("acme", "bob@acme.test", DEMO_PASSWORD, home)).status, "the owner at home").to.equal(201);
    expect(
      (await login("acme", "bob@acme.test", DEMO_PASSWORD, fresh)).status,
      "the owner elsewhere: 5 failures are not the account's 20",
    ).to.equal(201);
  });

  it(`judges at most ${ALLOWED} of parallel guesses spread over two identity replicas (REDIS_URL, DATABASE_URL)`, async function () {
    if (!replicated) {
      console.log(
        "      (two-replica attack skipped: REDIS_URL and DATABASE_URL are both needed — replicas share the counts through Redis, their users and keys through the server)",
      );
      this.skip();
    }
    const judgedBy = () =>
      [0, 1].map(
        (r) =>
          env.mesh
            .logsOf("identity", r)
            .join("")
            .split("\n")
            .filter((l) => l.includes("IdentityService/CreateSession")).length,
      );
    const before = judgedBy();
    await guessInParallel("globex", "carol@globex.test", "203.0.113.20");
    // Their logs come a moment after the answers.
    let spread = judgedBy().map((n, r) => n - before[r]!);
    for (const until = Date.now() + 5_000; spread[0]! + spread[1]! < GUESSES && Date.now() < until; await sleep(20))
      spread = judgedBy().map((n, r) => n - before[r]!);
    expect(spread, "both replicas answered guesses").to.satisfy((counts: number[]) => counts.every((n) => n > 0));
    expectError(await login("globex", "carol@globex.test", DEMO_PASSWORD, "203.0.113.20"), 429, "LOGIN_THROTTLED");
  });
});
