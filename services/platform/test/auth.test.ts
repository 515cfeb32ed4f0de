// Token verification: what gets a caller in, and every way a token is refused.
import { expect } from "chai";
import { exportJWK, generateKeyPair, SignJWT, type JWK } from "jose";
import { ConnectError } from "@connectrpc/connect";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import {
  requireRole,
  requireTenant,
  SERVICE_TOKEN_AUDIENCE,
  TOKEN_AUDIENCE,
  TOKEN_ISSUER,
} from "@switchyard/platform/caller.js";
import { bearerToken, KEY_MAX_AGE_MS, TokenVerifier } from "@switchyard/platform/auth.js";

async function keyPair(kid: string) {
  const { privateKey, publicKey } = await generateKeyPair("EdDSA", { crv: "Ed25519", extractable: true });
  return { privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: "EdDSA", use: "sig" } as JWK, kid };
}

const NOW = 1_800_000_000_000;
const claims = (overrides: Record<string, unknown> = {}) => ({
  iss: TOKEN_ISSUER,
  aud: TOKEN_AUDIENCE,
  sub: "7",
  tid: "acme",
  role: "admin",
  sid: "ses_1",
  iat: NOW / 1000,
  exp: NOW / 1000 + 900,
  ...overrides,
});

async function reason(p: Promise<unknown>): Promise<string | undefined> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).to.be.instanceOf(ConnectError);
  return errorInfoOf(err as ConnectError)?.reason;
}

describe("TokenVerifier", () => {
  let key: Awaited<ReturnType<typeof keyPair>>;
  let other: Awaited<ReturnType<typeof keyPair>>;
  const sign = (k: typeof key, body: Record<string, unknown>, alg = "EdDSA") =>
    new SignJWT(body).setProtectedHeader({ alg, kid: k.kid }).sign(k.privateKey);

  before(async () => {
    key = await keyPair("k1");
    other = await keyPair("k2");
  });

  it("accepts a valid token and names the caller", async () => {
    const verifier = new TokenVerifier(
      async () => [key.jwk],
      () => NOW,
    );
    const token = await sign(key, claims());
    const caller = await verifier.verify(token);
    expect(caller).to.include({ tenantId: "acme", role: "admin", sessionId: "ses_1", token });
    expect(caller.userId).to.equal(7n);
  });

  it("refuses an expired token, also once it was cached as valid", async () => {
    let now = NOW;
    const verifier = new TokenVerifier(
      async () => [key.jwk],
      () => now,
    );
    const token = await sign(key, claims());
    await verifier.verify(token);
    now = NOW + 901_000;
    expect(await reason(verifier.verify(token))).to.equal("UNAUTHENTICATED");
    const expired = await sign(key, claims({ exp: NOW / 1000 - 1 }));
    expect(await reason(verifier.verify(expired))).to.equal("UNAUTHENTICATED");
  });

  it("refuses alg none, a foreign key, a tampered payload, wrong issuer or audience, and missing claims", async () => {
    const verifier = new TokenVerifier(
      async () => [key.jwk],
      () => NOW,
    );
    const valid = await sign(key, claims());
    const [header, payload, signature] = valid.split(".");
    const none = `${Buffer.from(JSON.stringify({ alg: "none", typ: "JWT" })).toString("base64url")}.${payload}.`;
    const tampered = `${header}.${Buffer.from(JSON.stringify(claims({ tid: "globex" }))).toString("base64url")}.${signature}`;
    const tokens = [
      none,
      tampered,
      await sign(other, claims()),
      await sign(key, claims({ iss: "someone-else" })),
      await sign(key, claims({ aud: "elsewhere" })),
      await sign(key, { ...claims(), tid: undefined }),
      await sign(key, claims({ role: "root" })),
      await sign(key, claims({ sub: "not-a-number" })),
      "garbage",
      "",
    ];
    for (const token of tokens) expect(await reason(verifier.verify(token)), token).to.equal("UNAUTHENTICATED");
  });

  it("looks the keys up again when a token names a key it has not seen (rotation)", async () => {
    let published = [key.jwk];
    let fetches = 0;
    let now = NOW;
    const verifier = new TokenVerifier(
      async () => {
        fetches++;
        return published;
      },
      () => now,
    );
    await verifier.verify(await sign(key, claims()));
    published = [other.jwk, key.jwk];
    now = NOW + 2_000;
    const caller = await verifier.verify(await sign(other, claims({ sub: "8" })));
    expect(caller.userId).to.equal(8n);
    expect(fetches).to.equal(2);
  });

  it("reports unreachable keys as an upstream not reached (503: nothing was done, retry), not as a bad token", async () => {
    const verifier = new TokenVerifier(
      async () => {
        throw new Error("identity down");
      },
      () => NOW,
    );
    expect(await reason(verifier.verify(await sign(key, claims())))).to.equal("UPSTREAM_UNREACHABLE");
  });

  it("parses only 'Bearer <token>' headers", () => {
    expect(bearerToken("Bearer abc.def.ghi")).to.equal("abc.def.ghi");
    expect(bearerToken("bearer abc")).to.equal("abc");
    for (const bad of [undefined, "", "Basic dXNlcjpwYXNz", "Bearer", "Bearer a b", "Bearer\tx"]) {
      expect(() => bearerToken(bad), String(bad)).to.throw(ConnectError);
    }
  });

  it("separates tenants and roles (403 reasons)", () => {
    const caller = { tenantId: "acme", userId: 1n, role: "member" as const, sessionId: "s", expiresAt: 0, token: "t" };
    expect(() => requireTenant(caller, "acme")).to.not.throw();
    expect(() => requireTenant(caller, "globex")).to.throw(/another tenant/);
    expect(() => requireRole(caller, "admin")).to.throw(/admin role/);
  });
});

describe("TokenVerifier: service tokens", () => {
  let key: Awaited<ReturnType<typeof keyPair>>;
  const sign = (body: Record<string, unknown>) =>
    new SignJWT(body).setProtectedHeader({ alg: "EdDSA", kid: key.kid }).sign(key.privateKey);
  const service = (overrides: Record<string, unknown> = {}) => ({
    iss: TOKEN_ISSUER,
    aud: SERVICE_TOKEN_AUDIENCE,
    sub: "orders",
    role: "service",
    iat: NOW / 1000,
    exp: NOW / 1000 + 300,
    ...overrides,
  });

  before(async () => {
    key = await keyPair("k1");
  });

  it("names the service of a valid service token", async () => {
    const verifier = new TokenVerifier(
      async () => [key.jwk],
      () => NOW,
    );
    const token = await sign(service());
    expect(await verifier.verifyService(token)).to.deep.equal({
      service: "orders",
      expiresAt: NOW / 1000 + 300,
      token,
    });
  });

  it("never takes a service token for a user's, nor a user's for a service's", async () => {
    const verifier = new TokenVerifier(
      async () => [key.jwk],
      () => NOW,
    );
    expect(await reason(verifier.verify(await sign(service())))).to.equal("UNAUTHENTICATED");
    expect(await reason(verifier.verifyService(await sign(claims())))).to.equal("UNAUTHENTICATED");
    // A user token dressed up with the service audience still lacks the service role.
    expect(await reason(verifier.verifyService(await sign({ ...claims(), aud: SERVICE_TOKEN_AUDIENCE })))).to.equal(
      "UNAUTHENTICATED",
    );
  });

  it("refuses a service token that is expired, of another role, or names no proper service", async () => {
    const verifier = new TokenVerifier(
      async () => [key.jwk],
      () => NOW,
    );
    for (const bad of [
      service({ exp: NOW / 1000 - 1 }),
      service({ role: "admin" }),
      service({ sub: "Orders!" }),
      service({ sub: "" }),
      service({ iss: "someone" }),
    ]) {
      expect(await reason(verifier.verifyService(await sign(bad))), JSON.stringify(bad)).to.equal("UNAUTHENTICATED");
    }
  });
});

describe("TokenVerifier: keys looked at again", () => {
  it("re-reads the keys after KEY_MAX_AGE_MS, keeps the ones it has when identity cannot be asked, and refuses a key that was dropped", async () => {
    const a = await keyPair("a");
    const b = await keyPair("b");
    let now = NOW;
    let published: JWK[] = [a.jwk];
    let reads = 0;
    let failing = false;
    const verifier = new TokenVerifier(
      async () => {
        reads++;
        if (failing) throw new Error("identity is away");
        return published;
      },
      () => now,
    );
    const signed = (k: typeof a, sid: string) =>
      new SignJWT(claims({ sid, exp: now / 1000 + 900 }))
        .setProtectedHeader({ alg: "EdDSA", kid: k.kid })
        .sign(k.privateKey);
    await verifier.verify(await signed(a, "s1"));
    expect(reads).to.equal(1);
    now += KEY_MAX_AGE_MS - 1;
    await verifier.verify(await signed(a, "s2"));
    expect(reads, "not yet").to.equal(1);
    now += 2;
    failing = true;
    expect(
      (await verifier.verify(await signed(a, "s3"))).sessionId,
      "the old keys still verify while identity is away",
    ).to.equal("s3");
    failing = false;
    published = [b.jwk];
    now += KEY_MAX_AGE_MS + 1;
    expect((await verifier.verify(await signed(b, "s4"))).sessionId, "the newly published key").to.equal("s4");
    expect(await reason(verifier.verify(await signed(a, "s5"))), "a dropped key no longer verifies").to.equal(
      "UNAUTHENTICATED",
    );
  });
});
