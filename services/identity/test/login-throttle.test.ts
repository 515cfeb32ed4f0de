// Login throttling and password hashing: attempts counted before they are judged (parallel guesses
// get at most the allowance), per (account, address), account and address; an owner's known address
// not locked by a stranger; refusals that grow, that give their count back, the same for accounts that
// do not exist, shared through Redis by replicas; Argon2id hashes, old
// scrypt hashes that still verify and ask to be replaced, and hashing that sheds instead of queueing
// without bound.
import { expect } from "chai";
import { randomBytes, scryptSync } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { create } from "@bufbuild/protobuf";
import { ConnectError, createHandlerContext } from "@connectrpc/connect";
import { CreateSessionRequestSchema, IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import { createLogger } from "@switchyard/platform/logger.js";
import { forEachDatabase } from "../../platform/test/support/databases.js";
import { forgetRedisKeys } from "../../../test/support/redis-keys.js";
import { identityHandlers } from "../src/rpc-handlers.js";
import { RevocationHub } from "../src/revocation-hub.js";
import { RotatingKeyRing } from "../src/signing-keys.js";
import { identityMigrations } from "../src/store/migrations.js";
import { SqlIdentityStore } from "../src/store/sql-store.js";
import { KNOWN_ADDRESSES_IN_MEMORY, KnownAddresses } from "../src/known-addresses.js";
import { blockSeconds, LoginThrottle, MAX_BLOCK_SECONDS } from "../src/login-throttle.js";
import { hashPassword, needsRehash, verifyPassword } from "../src/passwords.js";

async function refusal(
  p: Promise<unknown>,
): Promise<{ reason: string | undefined; retryAfter: string | undefined } | undefined> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!err) return undefined;
  expect(err).to.be.instanceOf(ConnectError);
  const info = errorInfoOf(err as ConnectError);
  return { reason: info?.reason, retryAfter: info?.metadata.retry_after_seconds };
}

describe("login throttle", () => {
  it("blocks from the allowed number of failures on, doubling up to 15 minutes", () => {
    expect([0, 4].map((n) => blockSeconds(n, 5, 30))).to.deep.equal([0, 0]);
    expect([5, 6, 7, 8, 9, 10, 40].map((n) => blockSeconds(n, 5, 30))).to.deep.equal([
      30,
      60,
      120,
      240,
      480,
      MAX_BLOCK_SECONDS,
      MAX_BLOCK_SECONDS,
    ]);
  });

  it("keeps a bounded number of known addresses in memory, forgetting the least recently signed in first", async () => {
    const known = new KnownAddresses(undefined, "switchyard:test:known");
    await known.remember("first");
    await known.remember("second");
    await known.remember("first");
    for (let i = 0; i < KNOWN_ADDRESSES_IN_MEMORY - 1; i++) await known.remember(`pair-${i}`);
    expect(await known.has("second"), "the oldest").to.equal(false);
    expect(await known.has("first"), "signed in again since").to.equal(true);
    expect(await known.has(`pair-${KNOWN_ADDRESSES_IN_MEMORY - 2}`)).to.equal(true);
  });
});

// The same rule in either store: in this process, and in Redis as replicas share it.
for (const store of ["memory", "Redis"] as const) {
  describe(`login throttle (${store})`, () => {
    before(function () {
      if (store === "Redis" && !process.env.REDIS_URL) {
        console.log("      (Redis suite skipped: REDIS_URL is not set)");
        this.skip();
      }
    });
    const throttles: LoginThrottle[] = [];
    const prefixes = new Set<string>();
    after(async () => {
      for (const t of throttles.splice(0)) await t.close();
      if (store === "Redis") await forgetRedisKeys(process.env.REDIS_URL!, prefixes);
    });
    /** A throttle of its own (allowance 5, first block 30 s), or another replica of one by its prefix. */
    const throttle = async (options: { firstBlockSeconds?: number; keyPrefix?: string } = {}) => {
      const keyPrefix = options.keyPrefix ?? `switchyard:test:login:${randomBytes(4).toString("hex")}`;
      prefixes.add(keyPrefix);
      const t = new LoginThrottle({
        failuresAllowed: 5,
        firstBlockSeconds: options.firstBlockSeconds ?? 30,
        redisUrl: store === "Redis" ? process.env.REDIS_URL : undefined,
        keyPrefix,
      });
      throttles.push(t);
      await t.ready();
      return t;
    };
    /** One attempt that, once admitted, ends as given; its refusal when it is not admitted. */
    const attempt = (
      t: LoginThrottle,
      email: string,
      address: string,
      outcome: "failed" | "succeeded" | "abandoned" = "failed",
      tenant = "acme",
    ) => refusal(t.begin(tenant, email, address).then(async (a) => await a[outcome]()));

    it("refuses a pair after 5 failures — every attempt, with the seconds to wait — whether or not the account exists", async () => {
      const t = await throttle();
      for (const email of ["alice@acme.test", "nobody@acme.test"]) {
        for (let i = 0; i < 5; i++) expect(await attempt(t, email, "192.0.2.1")).to.equal(undefined);
        const refused = await attempt(t, email, "192.0.2.1", "succeeded");
        expect(refused?.reason).to.equal("LOGIN_THROTTLED");
        expect(Number(refused?.retryAfter)).to.be.within(25, 30);
      }
      expect(
        await attempt(t, "ALICE@acme.test ", "192.0.2.1"),
        "the same account however the email is written",
      ).to.deep.include({ reason: "LOGIN_THROTTLED" });
      expect(
        await attempt(t, "alice@acme.test", "192.0.2.1", "failed", "globex"),
        "another tenant's account is another account",
      ).to.equal(undefined);
    });

    it("judges at most the allowance of many parallel guesses, and refuses the rest", async () => {
      const t = await throttle();
      const guesses = await Promise.all(
        Array.from({ length: 36 }, async () => {
          const refused = await refusal(
            t.begin("acme", "alice@acme.test", "192.0.2.2").then(async (a) => {
              await sleep(50); // the password being checked
              await a.failed();
            }),
          );
          return refused?.reason ?? "judged";
        }),
      );
      const judged = guesses.filter((g) => g === "judged").length;
      expect(judged, guesses.join()).to.be.within(1, 5);
      expect(guesses.filter((g) => g === "LOGIN_THROTTLED").length).to.equal(36 - judged);
    });

    it("gives a refused attempt's count back: it holds no place and extends no block", async () => {
      const t = await throttle({ firstBlockSeconds: 1 });
      const held = await Promise.all(Array.from({ length: 5 }, () => t.begin("acme", "bob@acme.test", "192.0.2.3")));
      for (let i = 0; i < 10; i++)
        expect(await attempt(t, "bob@acme.test", "192.0.2.3"), "while 5 are being judged").to.deep.equal({
          reason: "LOGIN_THROTTLED",
          retryAfter: "1",
        });
      for (const a of held.splice(0, 4)) await a.abandoned();
      expect(await attempt(t, "bob@acme.test", "192.0.2.3"), "the refusals took no place").to.equal(undefined);
      await held[0]!.failed();
      for (let i = 0; i < 3; i++) expect(await attempt(t, "bob@acme.test", "192.0.2.3")).to.equal(undefined);
      // 5 failures: blocked 1 s; refusals meanwhile do not make it longer.
      for (let i = 0; i < 10; i++)
        expect(await attempt(t, "bob@acme.test", "192.0.2.3")).to.deep.equal({
          reason: "LOGIN_THROTTLED",
          retryAfter: "1",
        });
      await sleep(1_100);
      expect(await attempt(t, "bob@acme.test", "192.0.2.3", "succeeded")).to.equal(undefined);
    });

    it("after a block, judges one attempt at a time, each failure doubling the block", async () => {
      const t = await throttle({ firstBlockSeconds: 1 });
      for (let i = 0; i < 5; i++) await attempt(t, "carol@acme.test", "192.0.2.4");
      for (const seconds of [1, 2]) {
        expect(await attempt(t, "carol@acme.test", "192.0.2.4")).to.deep.equal({
          reason: "LOGIN_THROTTLED",
          retryAfter: String(seconds),
        });
        await sleep(seconds * 1000 + 100);
        const judged = await t.begin("acme", "carol@acme.test", "192.0.2.4");
        expect(await attempt(t, "carol@acme.test", "192.0.2.4"), "a second one at the same time").to.deep.equal({
          reason: "LOGIN_THROTTLED",
          retryAfter: "1",
        });
        await judged.failed();
      }
      expect(await attempt(t, "carol@acme.test", "192.0.2.4")).to.deep.equal({
        reason: "LOGIN_THROTTLED",
        retryAfter: "4",
      });
    });

    it("does not let a stranger lock the owner out of an address they signed in from", async () => {
      const t = await throttle();
      expect(await attempt(t, "dave@acme.test", "192.0.2.5", "succeeded"), "the owner, at home").to.equal(undefined);
      for (let i = 0; i < 5; i++) await attempt(t, "dave@acme.test", "198.51.100.1");
      expect(
        await attempt(t, "dave@acme.test", "198.51.100.1", "succeeded"),
        "the stranger's address, the right password too",
      ).to.deep.include({ reason: "LOGIN_THROTTLED" });
      expect(await attempt(t, "dave@acme.test", "192.0.2.5", "succeeded"), "the owner at home").to.equal(undefined);
      expect(
        await attempt(t, "dave@acme.test", "192.0.2.6", "succeeded"),
        "the owner elsewhere, the account below its bound",
      ).to.equal(undefined);
    });

    it("bounds guessing per account across many addresses (four times a pair's allowance), except from known ones", async () => {
      const t = await throttle();
      expect(await attempt(t, "erin@acme.test", "192.0.2.7", "succeeded")).to.equal(undefined);
      for (let i = 0; i < 19; i++)
        expect(await attempt(t, "erin@acme.test", `198.51.100.${10 + i}`)).to.equal(undefined);
      expect(
        await attempt(t, "erin@acme.test", "198.51.100.99", "abandoned"),
        "19 failures: a new address still gets in",
      ).to.equal(undefined);
      expect(await attempt(t, "erin@acme.test", "198.51.100.29")).to.equal(undefined);
      const refused = await attempt(t, "erin@acme.test", "198.51.100.99", "succeeded");
      expect(refused?.reason, "20 failures: every new address is refused").to.equal("LOGIN_THROTTLED");
      expect(Number(refused?.retryAfter)).to.be.within(25, 30);
      expect(await attempt(t, "erin@acme.test", "192.0.2.7", "succeeded"), "the owner's known address is not").to.equal(
        undefined,
      );
    });

    it("forgets a pair's failures after a good login, but not the account's or the address's", async () => {
      const t = await throttle();
      for (let i = 0; i < 4; i++) await attempt(t, "frank@acme.test", "192.0.2.8");
      expect(await attempt(t, "frank@acme.test", "192.0.2.8", "succeeded")).to.equal(undefined);
      for (let i = 0; i < 4; i++) expect(await attempt(t, "frank@acme.test", "192.0.2.8")).to.equal(undefined);
      // The account has 8 failures; 12 more from elsewhere make the 20 it may have.
      for (let i = 0; i < 12; i++) await attempt(t, "frank@acme.test", `198.51.100.${40 + (i % 3)}`);
      expect(await attempt(t, "frank@acme.test", "198.51.100.50", "succeeded")).to.deep.include({
        reason: "LOGIN_THROTTLED",
      });
    });

    it("refuses an address that fails across many accounts (four times a pair's allowance), unless it is known to the account", async () => {
      const t = await throttle();
      expect(await attempt(t, "grace@acme.test", "192.0.2.9", "succeeded")).to.equal(undefined);
      for (let i = 0; i < 20; i++) await attempt(t, `guess-${i}@acme.test`, "192.0.2.9");
      expect(await attempt(t, "anyone@acme.test", "192.0.2.9")).to.deep.include({ reason: "LOGIN_THROTTLED" });
      expect(await attempt(t, "anyone@acme.test", "192.0.2.10"), "another address").to.equal(undefined);
      expect(
        await attempt(t, "grace@acme.test", "192.0.2.9", "succeeded"),
        "an account that signed in from it",
      ).to.equal(undefined);
    });

    if (store === "Redis") {
      it("shares counts, blocks and known addresses between replicas", async () => {
        const keyPrefix = `switchyard:test:login:${randomBytes(4).toString("hex")}`;
        const [one, two] = [await throttle({ keyPrefix }), await throttle({ keyPrefix })];
        expect(await attempt(one, "heidi@acme.test", "192.0.2.11", "succeeded")).to.equal(undefined);
        for (let i = 0; i < 5; i++) await attempt(i % 2 === 0 ? one : two, "heidi@acme.test", "198.51.100.60");
        expect(await attempt(one, "heidi@acme.test", "198.51.100.60")).to.deep.include({ reason: "LOGIN_THROTTLED" });
        expect(await attempt(two, "heidi@acme.test", "198.51.100.60")).to.deep.include({ reason: "LOGIN_THROTTLED" });
        expect(
          await attempt(two, "heidi@acme.test", "192.0.2.11", "succeeded"),
          "known on the other replica too",
        ).to.equal(undefined);
      });

      it("judges at most the allowance of parallel guesses spread over two replicas", async () => {
        const keyPrefix = `switchyard:test:login:${randomBytes(4).toString("hex")}`;
        const replicas = [await throttle({ keyPrefix }), await throttle({ keyPrefix })];
        const guesses = await Promise.all(
          Array.from({ length: 36 }, async (_, i) => {
            const refused = await refusal(
              replicas[i % 2]!.begin("acme", "ivan@acme.test", "192.0.2.12").then(async (a) => {
                await sleep(50);
                await a.failed();
              }),
            );
            return refused?.reason ?? "judged";
          }),
        );
        expect(guesses.filter((g) => g === "judged").length, guesses.join()).to.be.within(1, 5);
      });
    }
  });
}

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
    const shed = outcomes
      .filter((o) => o.status === "rejected")
      .map((o) => errorInfoOf(o.reason as ConnectError)?.reason);
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
    const legacy = [
      "scrypt",
      14,
      8,
      1,
      salt.toString("base64url"),
      scryptSync("old-but-good", salt, 32, { N: 2 ** 14, r: 8, p: 1, maxmem: 64 * 1024 * 1024 }).toString("base64url"),
    ].join("$");
    await store.createUser({
      tenantId: "acme",
      email: "old@acme.test",
      fullName: "Old Hash",
      givenName: "Old Hash",
      familyName: "",
      role: "member",
      passwordHash: legacy,
    });
    const throttle = new LoginThrottle({ failuresAllowed: 5, firstBlockSeconds: 30 });
    const handlers = identityHandlers({
      store,
      keys: await RotatingKeyRing.open(store, {
        rotationMs: 86_400_000,
        publishLeadMs: 600_000,
        tokenTtlMs: 900_000,
        encryptionKey: undefined,
        logger: createLogger("test", "silent"),
      }),
      tokenTtlSeconds: 900,
      serviceClients: new Map(),
      throttle,
      revocations: new RevocationHub(store, createLogger("test", "silent")),
    });
    const login = async (password: string) =>
      await handlers.createSession(
        create(CreateSessionRequestSchema, { tenantId: "acme", email: "old@acme.test", password }),
        createHandlerContext({
          service: IdentityService,
          method: IdentityService.method.createSession,
          protocolName: "grpc",
          requestMethod: "POST",
          url: "/",
        }),
      );
    expect(await refusal(login("wrong-password")), "a wrong password does not replace the hash").to.deep.include({
      reason: "INVALID_CREDENTIALS",
    });
    expect((await store.findUserByEmail("acme", "old@acme.test"))!.passwordHash).to.equal(legacy);
    expect((await login("old-but-good")).accessToken).to.be.a("string");
    const upgraded = (await store.findUserByEmail("acme", "old@acme.test"))!.passwordHash;
    expect(upgraded).to.match(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    expect(await verifyPassword("old-but-good", upgraded)).to.equal(true);
    expect((await login("old-but-good")).accessToken, "and it logs in with the new hash").to.be.a("string");
    await throttle.close();
  });
});
