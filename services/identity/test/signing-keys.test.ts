// Signing keys that rotate and are never stored in the clear: when keys come and go (pure), the key
// ring on a real engine under a test clock (published before it signs, retired keys kept until their
// tokens expire, one new key however many replicas rotate at once), and sealing at rest.
import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { decodeProtectedHeader, createLocalJWKSet, jwtVerify } from "jose";
import { ConfigError } from "@switchyard/platform/config.js";
import { createLogger } from "@switchyard/platform/logger.js";
import type { SqlDatabase } from "@switchyard/platform/store";
import { forEachDatabase } from "../../platform/test/support/databases.js";
import { planRotation, signingKeyOf } from "../src/domain/key-rotation.js";
import { isSealed, parseEncryptionKey, seal, unseal } from "@switchyard/platform/sealing.js";
import { identityConfigFrom } from "../src/service.js";
import { RotatingKeyRing } from "../src/signing-keys.js";
import { identityMigrations } from "../src/store/migrations.js";
import { SqlIdentityStore } from "../src/store/sql-store.js";

const KIND = { what: "signing key", keySetting: "SIGNING_KEY_ENCRYPTION_KEY" };

const HOUR = 3_600_000;
const settings = { rotationMs: 24 * HOUR, publishLeadMs: 10 * 60_000, tokenTtlMs: 15 * 60_000 };

describe("key rotation plan", () => {
  const T = 1_000 * HOUR;
  it("makes the first key active at once", () => {
    expect(planRotation([], T, settings)).to.deep.equal({ addActivatingAt: T, remove: [] });
  });
  it("publishes the next key the lead time before the signing one's period ends, and only one", () => {
    const keys = [{ kid: "a", activatesAt: T }];
    expect(planRotation(keys, T + 23 * HOUR, settings), "not due yet").to.deep.equal({ remove: [] });
    const due = T + 24 * HOUR - 10 * 60_000;
    expect(planRotation(keys, due, settings)).to.deep.equal({ addActivatingAt: T + 24 * HOUR, remove: [] });
    expect(
      planRotation([...keys, { kid: "b", activatesAt: T + 24 * HOUR }], due + 1, settings),
      "one is pending already",
    ).to.deep.equal({ remove: [] });
  });
  it("gives a late rotation its full lead time", () => {
    expect(planRotation([{ kid: "a", activatesAt: T }], T + 30 * HOUR, settings).addActivatingAt).to.equal(
      T + 30 * HOUR + 10 * 60_000,
    );
  });
  it("forgets a retired key once the last token it signed has expired, and not before", () => {
    const keys = [
      { kid: "a", activatesAt: T },
      { kid: "b", activatesAt: T + 24 * HOUR },
    ];
    expect(planRotation(keys, T + 24 * HOUR + 14 * 60_000, settings).remove).to.deep.equal([]);
    expect(planRotation(keys, T + 24 * HOUR + 15 * 60_000, settings).remove).to.deep.equal(["a"]);
    expect(signingKeyOf(keys, T + 24 * HOUR - 1)?.kid, "b signs only from its activation").to.equal("a");
    expect(signingKeyOf(keys, T + 24 * HOUR)?.kid).to.equal("b");
  });
});

describe("key sealing", () => {
  const key = randomBytes(32);
  it("seals with AES-256-GCM bound to the key id, and opens only with the same key and id", () => {
    const sealed = seal('{"d":"secret"}', "kid-1", key);
    expect(isSealed(sealed)).to.equal(true);
    expect(sealed).to.not.include("secret");
    expect(unseal(sealed, "kid-1", key, KIND)).to.equal('{"d":"secret"}');
    expect(() => unseal(sealed, "kid-2", key, KIND), "moved to another row").to.throw(/another key/);
    expect(() => unseal(sealed, "kid-1", randomBytes(32), KIND)).to.throw(/another key/);
  });
  it("reads the key from base64 of exactly 32 bytes", () => {
    expect(parseEncryptionKey(key.toString("base64")).equals(key)).to.equal(true);
    expect(parseEncryptionKey(key.toString("base64url")).equals(key)).to.equal(true);
    for (const bad of ["", "short", randomBytes(16).toString("base64"), `${key.toString("base64")}AAAA`])
      expect(() => parseEncryptionKey(bad), bad).to.throw();
  });
  it("is required of identity on a database server", () => {
    expect(() => identityConfigFrom({ DATABASE_URL: "postgres://u@127.0.0.1/db" })).to.throw(
      ConfigError,
      /SIGNING_KEY_ENCRYPTION_KEY is required/,
    );
    expect(
      identityConfigFrom({
        DATABASE_URL: "postgres://u@127.0.0.1/db",
        SIGNING_KEY_ENCRYPTION_KEY: key.toString("base64"),
      }).keyEncryptionKey?.equals(key),
    ).to.equal(true);
    expect(identityConfigFrom({}).keyEncryptionKey, "embedded storage may go without").to.equal(undefined);
  });
});

forEachDatabase("signing key ring", (dbs) => {
  const logger = createLogger("test", "silent");
  let now = 2_000 * HOUR;
  const clock = () => now;
  const kek = randomBytes(32);
  const rings: RotatingKeyRing[] = [];
  after(() => rings.forEach((r) => r.stop()));
  const open = async (store: SqlIdentityStore, encryptionKey: Buffer | undefined) => {
    const ring = await RotatingKeyRing.open(store, {
      ...settings,
      encryptionKey,
      logger,
      now: clock,
      reloadMs: 3_600_000,
    });
    rings.push(ring);
    return ring;
  };
  const kidOf = (token: string) => decodeProtectedHeader(token).kid;
  const verifies = async (token: string, ring: RotatingKeyRing) =>
    jwtVerify(token, createLocalJWKSet({ keys: ring.publicKeys() }), { currentDate: new Date(now) }).then(
      () => true,
      () => false,
    );
  const storedKeys = async (db: SqlDatabase) =>
    (
      await db.query<{ kid: string; private_jwk: string; public_jwk: string }>(
        "SELECT kid, private_jwk, public_jwk FROM signing_keys",
      )
    ).rows;

  it("publishes the next key before it signs, signs with it from its activation, and keeps the retired one until its tokens expire", async () => {
    now = 2_000 * HOUR;
    const db = await dbs.open(identityMigrations);
    const ring = await open(new SqlIdentityStore(db), kek);
    const first = await ring.sign({ sub: "1", exp: now / 1000 + 900 });
    expect(ring.publicKeys()).to.have.length(1);
    now += 24 * HOUR - 10 * 60_000; // the lead time before the period's end
    await ring.refresh();
    expect(ring.publicKeys(), "the next key is published").to.have.length(2);
    expect(kidOf(await ring.sign({ sub: "1" })), "…but does not sign yet").to.equal(kidOf(first));
    now += 10 * 60_000;
    await ring.refresh();
    const second = await ring.sign({ sub: "1", exp: now / 1000 + 900 });
    expect(kidOf(second)).to.not.equal(kidOf(first));
    now += 10 * 60_000;
    await ring.refresh();
    expect(await verifies(second, ring)).to.equal(true);
    expect(
      ring.publicKeys().map((k) => k.kid),
      "the retired key is still published while its tokens may live",
    ).to.include(kidOf(first));
    now += 6 * 60_000;
    await ring.refresh();
    expect(
      ring.publicKeys().map((k) => k.kid),
      "and forgotten after",
    ).to.deep.equal([kidOf(second)]);
  });

  it("never stores a private key in the clear, opens only with its key, and seals keys it finds in the clear", async () => {
    now = 3_000 * HOUR;
    const place = dbs.place();
    const db = await place.open(identityMigrations);
    const store = new SqlIdentityStore(db);
    // A key stored in the clear by an earlier version (before sealing existed).
    await (await open(store, undefined)).sign({ sub: "1" });
    expect(isSealed((await storedKeys(db))[0]!.private_jwk)).to.equal(false);
    const ring = await open(store, kek);
    const rows = await storedKeys(db);
    expect(rows.length).to.equal(1);
    for (const row of rows) {
      expect(isSealed(row.private_jwk), "sealed at rest").to.equal(true);
      expect(row.private_jwk).to.not.match(/"d":/);
      expect(JSON.parse(row.public_jwk)).to.not.have.property("d");
    }
    expect(await verifies(await ring.sign({ sub: "1", exp: now / 1000 + 60 }), ring)).to.equal(true);
    let err = await RotatingKeyRing.open(store, {
      ...settings,
      encryptionKey: randomBytes(32),
      logger,
      now: clock,
    }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).to.match(/does not open with SIGNING_KEY_ENCRYPTION_KEY/);
    err = await RotatingKeyRing.open(store, { ...settings, encryptionKey: undefined, logger, now: clock }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).to.match(/SIGNING_KEY_ENCRYPTION_KEY is not set/);
  });

  it("makes one new key however many replicas find a rotation due at once", async function () {
    if (!dbs.target.sharedOpens) {
      console.log("      (skipped here: replicas share a database only on the PostgreSQL server)");
      return this.skip();
    }
    now = 4_000 * HOUR;
    const place = dbs.place();
    const stores = await Promise.all(
      [1, 2, 3, 4].map(async () => new SqlIdentityStore(await place.open(identityMigrations))),
    );
    const rings = await Promise.all(stores.map((s) => open(s, kek)));
    expect((await storedKeys(await place.open(identityMigrations))).length, "one first key").to.equal(1);
    now += 24 * HOUR;
    await Promise.all(rings.map((r) => r.refresh()));
    expect((await storedKeys(await place.open(identityMigrations))).length, "one next key").to.equal(2);
    const kids = new Set(
      rings.map((r) =>
        r
          .publicKeys()
          .map((k) => k.kid)
          .sort()
          .join(),
      ),
    );
    expect(kids.size, "every replica publishes the same keys").to.equal(1);
  });
});
