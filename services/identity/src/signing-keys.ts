// The token signing key ring: Ed25519 keys kept in identity's own database (so replicas and
// restarts agree), the newest one signing, all of them published as the JWKS.
import { randomUUID } from "node:crypto";
import { exportJWK, generateKeyPair, importJWK, SignJWT, type JWK } from "jose";
import { TOKEN_ALGORITHM } from "@switchyard/platform";
import type { IdentityStore } from "./store/port.js";

export interface KeyRing {
  sign(claims: Record<string, unknown>): Promise<string>;
  publicKeys(): JWK[];
}

export async function loadKeyRing(store: IdentityStore): Promise<KeyRing> {
  if ((await store.signingKeys()).length === 0) {
    const { privateKey, publicKey } = await generateKeyPair(TOKEN_ALGORITHM, { crv: "Ed25519", extractable: true });
    const kid = randomUUID();
    const meta = { kid, alg: TOKEN_ALGORITHM, use: "sig" };
    await store.addSigningKey({
      kid,
      privateJwk: JSON.stringify({ ...(await exportJWK(privateKey)), ...meta }),
      publicJwk: JSON.stringify({ ...(await exportJWK(publicKey)), ...meta }),
    });
  }
  // Re-read: a replica starting at the same moment may have added its own; the newest signs.
  const records = await store.signingKeys();
  const newest = records[0]!;
  const signingKey = await importJWK(JSON.parse(newest.privateJwk) as JWK, TOKEN_ALGORITHM);
  const published = records.map((r) => JSON.parse(r.publicJwk) as JWK);
  return {
    sign: (claims) => new SignJWT(claims).setProtectedHeader({ alg: TOKEN_ALGORITHM, kid: newest.kid, typ: "JWT" }).sign(signingKey),
    publicKeys: () => published,
  };
}
