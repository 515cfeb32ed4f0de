// Revoked sessions as a verifier knows them: refused (cached tokens too), forgotten once their tokens
// expire, and a live call watching its credential is told the moment it is revoked or expires.
import { expect } from "chai";
import { exportJWK, generateKeyPair, SignJWT, type JWK } from "jose";
import { ConnectError, type HandlerContext } from "@connectrpc/connect";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import { SERVICE_AUTHORIZATION, TOKEN_AUDIENCE, TOKEN_ISSUER } from "@switchyard/platform/caller.js";
import { TokenVerifier } from "@switchyard/platform/auth.js";
import { RevocationList } from "@switchyard/platform/revocations.js";

describe("RevocationList", () => {
  it("knows a revoked session until its token expires, then forgets it", () => {
    let now = 1_000_000;
    const list = new RevocationList(() => now);
    list.revoke("ses_a", now + 5_000);
    list.revoke("ses_old", now - 1); // expired already: nothing to refuse
    expect(list.isRevoked("ses_a")).to.equal(true);
    expect(list.isRevoked("ses_old")).to.equal(false);
    expect(list.isRevoked("ses_b")).to.equal(false);
    now += 5_001;
    expect(list.isRevoked("ses_a")).to.equal(false);
    expect(list.size).to.equal(0);
  });

  it("tells who waits on a session once, when it is revoked (at once if it is already)", () => {
    const list = new RevocationList();
    const heard: string[] = [];
    const stop = list.onRevoked("ses_a", () => heard.push("a"));
    list.onRevoked("ses_b", () => heard.push("b"));
    const unheard = list.onRevoked("ses_c", () => heard.push("c"));
    unheard();
    list.revoke("ses_a", Date.now() + 60_000);
    list.revoke("ses_a", Date.now() + 60_000);
    list.revoke("ses_c", Date.now() + 60_000);
    stop();
    expect(heard).to.deep.equal(["a"]);
    list.onRevoked("ses_a", () => heard.push("a again"));
    expect(heard).to.deep.equal(["a", "a again"]);
  });
});

describe("TokenVerifier with revocations", () => {
  const NOW = 1_800_000_000_000;
  let key: { privateKey: Awaited<ReturnType<typeof generateKeyPair>>["privateKey"]; jwk: JWK };
  before(async () => {
    const pair = await generateKeyPair("EdDSA", { crv: "Ed25519", extractable: true });
    key = {
      privateKey: pair.privateKey,
      jwk: { ...(await exportJWK(pair.publicKey)), kid: "k1", alg: "EdDSA", use: "sig" },
    };
  });
  const token = (sid: string, expSeconds = NOW / 1000 + 900) =>
    new SignJWT({
      iss: TOKEN_ISSUER,
      aud: TOKEN_AUDIENCE,
      sub: "7",
      tid: "acme",
      role: "member",
      sid,
      iat: NOW / 1000,
      exp: expSeconds,
    })
      .setProtectedHeader({ alg: "EdDSA", kid: "k1" })
      .sign(key.privateKey);
  const reason = (p: Promise<unknown>) =>
    p.then(
      () => undefined,
      (e: unknown) => errorInfoOf(e as ConnectError)?.reason,
    );

  it("refuses a revoked session's token, also when it was verified (and cached) before", async () => {
    const now = NOW;
    const list = new RevocationList(() => now);
    const verifier = new TokenVerifier(
      async () => [key.jwk],
      () => now,
      list,
    );
    const t = await token("ses_1");
    expect((await verifier.verify(t)).sessionId).to.equal("ses_1");
    list.revoke("ses_1", now + 900_000);
    expect(await reason(verifier.verify(t))).to.equal("UNAUTHENTICATED");
    expect((await verifier.verify(await token("ses_2"))).sessionId, "other sessions are fine").to.equal("ses_2");
  });

  it("answers an Authorization header it has seen from its text, and still refuses it once its token expires or its session is revoked", async () => {
    let now = NOW;
    const list = new RevocationList(() => now);
    const verifier = new TokenVerifier(
      async () => [key.jwk],
      () => now,
      list,
    );
    const t = await token("ses_h");
    const header = `Bearer ${t}`;
    expect(verifier.knownAuthorization(header), "not seen yet: verifyAuthorization decides").to.equal(undefined);
    const first = await verifier.verifyAuthorization(header);
    expect(first).to.include({ sessionId: "ses_h", token: t });
    expect(verifier.knownAuthorization(header), "seen: known at once").to.equal(first);
    expect(verifier.knownAuthorization(undefined)).to.equal(undefined);
    // A call: known by its authorization metadata, unless an internal service's token comes with it (authenticate checks that).
    const call = (headers: Record<string, string>) =>
      ({ requestHeader: new Headers(headers) }) as unknown as HandlerContext;
    expect(verifier.knownCaller(call({ authorization: header }))).to.equal(first);
    expect(verifier.knownCaller(call({ authorization: header, [SERVICE_AUTHORIZATION]: "Bearer x" }))).to.equal(
      undefined,
    );
    expect(verifier.knownCaller(call({}))).to.equal(undefined);
    // The second time no token is read from the header: verify() is not reached.
    const verify = verifier.verify.bind(verifier);
    let verified = 0;
    verifier.verify = (tk: string) => (verified++, verify(tk));
    expect(await verifier.verifyAuthorization(header)).to.equal(first);
    expect(verified, "a remembered header is not parsed and verified again").to.equal(0);
    expect((await verifier.verifyAuthorization(`bearer ${t}`)).sessionId, "another spelling is parsed").to.equal(
      "ses_h",
    );
    expect(verified).to.equal(1);
    for (const bad of [undefined, "", "Basic dXNlcjpwYXNz", `Bearer ${t} x`, `Bearer ${t.slice(0, -2)}`]) {
      expect(await reason(verifier.verifyAuthorization(bad)), String(bad)).to.equal("UNAUTHENTICATED");
    }
    list.revoke("ses_h", now + 900_000);
    expect(verifier.knownAuthorization(header), "revoked: no longer known").to.equal(undefined);
    expect(await reason(verifier.verifyAuthorization(header)), "revoked after it was remembered").to.equal(
      "UNAUTHENTICATED",
    );
    const other = await token("ses_e");
    await verifier.verifyAuthorization(`Bearer ${other}`);
    now = NOW + 901_000;
    expect(verifier.knownAuthorization(`Bearer ${other}`), "expired: no longer known").to.equal(undefined);
    expect(await reason(verifier.verifyAuthorization(`Bearer ${other}`)), "expired after it was remembered").to.equal(
      "UNAUTHENTICATED",
    );
  });

  it("ends a watch at the token's expiry, or at once when its session is revoked, and only once", async () => {
    const list = new RevocationList();
    const verifier = new TokenVerifier(async () => [key.jwk], Date.now, list);
    const now = Math.floor(Date.now() / 1000);
    const short = await verifier.verify(
      await new SignJWT({
        iss: TOKEN_ISSUER,
        aud: TOKEN_AUDIENCE,
        sub: "7",
        tid: "acme",
        role: "member",
        sid: "ses_short",
        iat: now,
        exp: now + 1,
      })
        .setProtectedHeader({ alg: "EdDSA", kid: "k1" })
        .sign(key.privateKey),
    );
    const ends: string[] = [];
    verifier.watch(short, (err) => ends.push(`short: ${(err as ConnectError).rawMessage}`));
    const long = await verifier.verify(
      await new SignJWT({
        iss: TOKEN_ISSUER,
        aud: TOKEN_AUDIENCE,
        sub: "7",
        tid: "acme",
        role: "member",
        sid: "ses_long",
        iat: now,
        exp: now + 900,
      })
        .setProtectedHeader({ alg: "EdDSA", kid: "k1" })
        .sign(key.privateKey),
    );
    verifier.watch(long, (err) => ends.push(`long: ${(err as ConnectError).rawMessage}`));
    const stopped = verifier.watch(long, () => ends.push("stopped watcher"));
    stopped();
    list.revoke("ses_long", Date.now() + 900_000);
    list.revoke("ses_long", Date.now() + 900_000);
    for (let i = 0; i < 40 && ends.length < 2; i++) await new Promise((r) => setTimeout(r, 50));
    expect(ends).to.deep.equal([
      "long: the token was revoked (logged out, or its user was removed)",
      "short: the token has expired",
    ]);
  });
});
