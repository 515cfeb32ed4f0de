// Secrets at rest (identity's private signing keys, webhook endpoints' signing secrets), sealed with
// AES-256-GCM under a 32-byte key given as base64: `aes256gcm:v1:<iv>:<ciphertext>:<tag>`
// (base64url), the owner's id bound in as additional data, so a sealed value cannot be moved to
// another row. Without the key, nothing decrypts.
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";

const PREFIX = "aes256gcm:v1:";

/** Reads a 32-byte key written as base64 or base64url. */
export function parseEncryptionKey(raw: string): Buffer {
  // 32 bytes are 43 base64 digits (and one '=' of padding).
  if (!/^[A-Za-z0-9+/_-]{43}=?$/.test(raw.trim()))
    throw new Error("expected 32 bytes written in base64 (e.g. openssl rand -base64 32)");
  return Buffer.from(raw.trim().replace(/-/g, "+").replace(/_/g, "/"), "base64");
}

export const isSealed = (stored: string) => stored.startsWith(PREFIX);

/** What a sealed value is, for the errors: e.g. { what: "signing key", keySetting: "SIGNING_KEY_ENCRYPTION_KEY" }. */
export interface SealedKind {
  what: string;
  keySetting: string;
}

/** Seals `plaintext` for the row `boundTo` (e.g. its id): it opens for that row only. */
export function seal(plaintext: string, boundTo: string, key: Buffer): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  cipher.setAAD(Buffer.from(boundTo, "utf8"));
  const ciphertext = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
  return `${PREFIX}${[iv, ciphertext, cipher.getAuthTag()].map((b) => b.toString("base64url")).join(":")}`;
}

/** The plaintext of a sealed value (throws when the key is not the one it was sealed with). */
export function unseal(stored: string, boundTo: string, key: Buffer, kind: SealedKind): string {
  const [iv, ciphertext, tag] = stored
    .slice(PREFIX.length)
    .split(":")
    .map((p) => Buffer.from(p, "base64url"));
  if (!iv || !ciphertext || !tag)
    throw new Error(`${kind.what} ${boundTo} is sealed in a form this version cannot read`);
  const decipher = createDecipheriv("aes-256-gcm", key, iv);
  decipher.setAAD(Buffer.from(boundTo, "utf8"));
  decipher.setAuthTag(tag);
  try {
    return Buffer.concat([decipher.update(ciphertext), decipher.final()]).toString("utf8");
  } catch {
    throw new Error(`${kind.what} ${boundTo} does not open with ${kind.keySetting}: it was sealed under another key`);
  }
}
