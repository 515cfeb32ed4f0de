// Login throttling and password hashing: counted per account and per address, refusals that grow,
// the same for accounts that do not exist, shared through Redis by replicas; Argon2id hashes, old
// scrypt hashes that still verify and ask to be replaced, and hashing that sheds instead of queueing
// without bound.
import { expect } from "chai";
import { randomBytes, scryptSync } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { ConnectError, createHandlerContext } from "@connectrpc/connect";
import { CreateSessionRequestSchema, IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import { createLogger } from "@switchyard/platform/logger.js";
import { forEachDatabase } from "../../platform/test/support/databases.js";
import { identityHandlers } from "../src/connect.js";
import { RevocationHub } from "../src/revocation-hub.js";
import { RotatingKeyRing } from "../src/signing-keys.js";
import { identityMigrations } from "../src/store/migrations.js";
import { SqlIdentityStore } from "../src/store/sql-store.js";
import { blockSeconds, LoginThrottle, MAX_BLOCK_SECONDS } from "../src/login-throttle.js";
import { hashPassword, needsRehash, verifyPassword } from "../src/passwords.js";

async function refusal(p: Promise<unknown>): Promise<{ reason: string | undefined; retryAfter: string | undefined } | undefined> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  if (!err) return undefined;
  expect(err).to.be.instanceOf(ConnectError);
  const info = errorInfoOf(err as ConnectError);
  return { reason: info?.reason, retryAfter: info?.metadata.retry_after_seconds };
}

describe("login throttle", () => {
  it("blocks from the allowed number of failures on, doubling up to 15 minutes", () => {
    expect([0, 4].map((n) => blockSeconds(n, 5, 30))).to.deep.equal([0, 0]);
    expect([5, 6, 7, 8, 9, 10, 40].map((n) => blockSeconds(n, 5, 30))).to.deep.equal([30, 60, 120, 240, 480, MAX_BLOCK_SECONDS, MAX_BLOCK_SECONDS]);
  });

  const throttles: LoginThrottle[] = [];
  after(async () => {
    for (const t of throttles) await t.close();
  });
  const throttle = (redisUrl?: string, keyPrefix = `switchyard:test:login:${randomBytes(4).toString("hex")}`) => {
    const t = new LoginThrottle({ failuresAllowed: 5, firstBlockSeconds: 30, redisUrl, keyPrefix });
    throttles.push(t);
    return t;
  };

  it("refuses an account after 5 failures — every attempt, with the seconds to wait — whether or not it exists", async () => {
    const t = throttle();
    for (const email of ["alice@acme.test", "nobody@acme.test"]) {
      for (let i = 0; i < 5; i++) {
        expect(await refusal(t.check("acme", email, "192.0.2.1"))).to.equal(undefined);
        await t.failed("acme", email, "192.0.2.1");
      }
      const refused = await refusal(t.check("acme", email, "192.0.2.1"));
      expect(refused?.reason).to.equal("LOGIN_THROTTLED");
      expect(Number(refused?.retryAfter)).to.be.within(25, 30);
    }
    expect(await refusal(t.check("acme", "ALICE@acme.test ", "192.0.2.99")), "the same account however the email is written").to.deep.include({ reason: "LOGIN_THROTTLED" });
    expect(await refusal(t.check("globex", "alice@acme.test", "192.0.2.1")), "another tenant's account is another account").to.equal(undefined);
  });

  it("forgets an account's failures after a good login, but not the address's", async () => {
    const t = throttle();
    for (let i = 0; i < 4; i++) await t.failed("acme", "bob@acme.test", "192.0.2.2");
    await t.succeeded("acme", "bob@acme.test", "192.0.2.2");
    for (let i = 0; i < 4; i++) await t.failed("acme", "bob@acme.test", "192.0.2.2");
    expect(await refusal(t.check("acme", "bob@acme.test", "192.0.2.2"))).to.equal(undefined);
  });

  it("refuses an address that fails across many accounts (four times an account's allowance)", async () => {
    const t = throttle();
    for (let i = 0; i < 20; i++) await t.failed("acme", `guess-${i}@acme.test`, "192.0.2.3");
    expect(await refusal(t.check("acme", "anyone@acme.test", "192.0.2.3"))).to.deep.include({ reason: "LOGIN_THROTTLED" });
    expect(await refusal(t.check("acme", "anyone@acme.test", "192.0.2.4")), "another address").to.equal(undefined);
  });

  it("shares the counters between replicas through Redis", async function () {
    if (!process.env.REDIS_URL) {
      console.log("      (Redis suite skipped: REDIS_URL is not set)");
      this.skip();
    }
    const prefix = `switchyard:test:login:${randomBytes(4).toString("hex")}`;
    const [one, two] = [throttle(process.env.REDIS_URL, prefix), throttle(process.env.REDIS_URL, prefix)];
    await Promise.all([one.ready(), two.ready()]);
    for (let i = 0; i < 5; i++) await (i % 2 === 0 ? one : two).failed("acme", "carol@acme.test", "192.0.2.5");
    expect(await refusal(one.check("acme", "carol@acme.test", "192.0.2.6"))).to.deep.include({ reason: "LOGIN_THROTTLED" });
    expect(await refusal(two.check("acme", "carol@acme.test", "192.0.2.6"))).to.deep.include({ reason: "LOGIN_THROTTLED" });
  });
});

describe("password hashes", () => {
  it("are Argon2id at OWASP's parameters, verify the right password only, and need no new hash", async () => {
    const hash = await hashPassword("correct horse battery");
    expect(hash).to.match(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    expect(await verifyPassword("correct horse battery", hash)).to.equal(true);
    expect(await verifyPassword("correct horse batterY", hash)).to.equal(false);
    expect(needsRehash(hash)).to.equal(false);
  });

  it("still verify an old scrypt hash, which asks to be replaced; a weaker Argon2id one too", async () => {
    const salt = randomBytes(16);
    const key = scryptSync("old-password", salt, 32, { N: 2 ** 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 });
    const legacy = ["scrypt", 15, 8, 1, salt.toString("base64url"), key.toString("base64url")].join("$");
    expect(await verifyPassword("old-password", legacy)).to.equal(true);
    expect(await verifyPassword("new-password", legacy)).to.equal(false);
    expect(needsRehash(legacy)).to.equal(true);
    expect(needsRehash("$argon2id$v=19$m=4096,t=3,p=1$c2FsdHNhbHQ$aGFzaA")).to.equal(true);
    expect(await verifyPassword("x", "not a hash")).to.equal(false);
  });

  it("shed a flood of checks at once (LOAD_SHED) instead of queueing it without bound", async () => {
    const hash = await hashPassword("flood");
    const outcomes = await Promise.allSettled(Array.from({ length: 60 }, () => verifyPassword("flood", hash)));
    const shed = outcomes.filter((o) => o.status === "rejected").map((o) => errorInfoOf((o as PromiseRejectedResult).reason as ConnectError)?.reason);
    expect(shed.length, "beyond the running and waiting checks").to.be.at.least(20);
    expect(new Set(shed)).to.deep.equal(new Set(["LOAD_SHED"]));
    expect(outcomes.filter((o) => o.status === "fulfilled" && o.value === true).length).to.equal(60 - shed.length);
  });
});

forEachDatabase("logging in with a hash of older parameters", (dbs) => {
  it("succeeds, and stores an Argon2id hash of the same password in its place", async () => {
    const store = new SqlIdentityStore(await dbs.open(identityMigrations));
    await store.upsertTenant({ id: "acme", displayName: "Acme" });
    const salt = randomBytes(16);
    const legacy = ["scrypt", 14, 8, 1, salt.toString("base64url"), scryptSync("old-but-good", salt, 32, { N: 2 ** 14, r: 8, p: 1, maxmem: 64 * 1024 * 1024 }).toString("base64url")].join("$");
    await store.createUser({ tenantId: "acme", email: "old@acme.test", fullName: "Old Hash", givenName: "Old Hash", familyName: "", role: "member", passwordHash: legacy });
    const throttle = new LoginThrottle({ failuresAllowed: 5, firstBlockSeconds: 30 });
    const handlers = identityHandlers({ store, keys: await RotatingKeyRing.open(store, { rotationMs: 86_400_000, publishLeadMs: 600_000, tokenTtlMs: 900_000, encryptionKey: undefined, logger: createLogger("test", "silent") }), tokenTtlSeconds: 900, serviceClients: new Map(), throttle, revocations: new RevocationHub(store, createLogger("test", "silent")) });
    const login = async (password: string) =>
      await handlers.createSession(
        create(CreateSessionRequestSchema, { tenantId: "acme", email: "old@acme.test", password }),
        createHandlerContext({ service: IdentityService, method: IdentityService.method.createSession, protocolName: "grpc", requestMethod: "POST", url: "/" }),
      );
    expect(await refusal(login("wrong-password")), "a wrong password does not replace the hash").to.deep.include({ reason: "INVALID_CREDENTIALS" });
    expect((await store.findUserByEmail("acme", "old@acme.test"))!.passwordHash).to.equal(legacy);
    expect((await login("old-but-good")).accessToken).to.be.a("string");
    const upgraded = (await store.findUserByEmail("acme", "old@acme.test"))!.passwordHash;
    expect(upgraded).to.match(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    expect(await verifyPassword("old-but-good", upgraded)).to.equal(true);
    expect((await login("old-but-good")).accessToken, "and it logs in with the new hash").to.be.a("string");
    await throttle.close();
  });
});
