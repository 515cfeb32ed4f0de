// Idempotency keys as values: the shape a client's key must have, the fingerprint of a request, and
// the key a service derives for a call it makes. Pure (handlers and rules use them); where keys are
// kept is store/idempotency.ts.
import { createHash, createHmac } from "node:crypto";
import { DomainError } from "./domain-error.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Refuses a key that is not a UUID (400). */
export function assertIdempotencyKey(key: string): void {
  if (!UUID.test(key)) throw new DomainError("IDEMPOTENCY_KEY_INVALID", "Idempotency-Key must be a UUID");
}

/** A stable fingerprint of the fields that make a request what it is. */
export function requestFingerprint(fields: Record<string, string | number | bigint | boolean>): string {
  const canonical = Object.keys(fields)
    .sort()
    .map((k) => `${k}=${JSON.stringify(String(fields[k]))}`)
    .join("&");
  return createHash("sha256").update(canonical).digest("base64url");
}

/**
 * A UUID-shaped key derived from what an operation is about (e.g. tenant, order, attempt) under the
 * calling service's own secret (HMAC-SHA256), for a service calling another idempotently: the same
 * operation always sends the same key, and nobody without the secret can predict it.
 */
export function derivedIdempotencyKey(secret: Uint8Array | string, ...parts: (string | number | bigint)[]): string {
  const h = createHmac("sha256", secret).update(parts.map(String).join("\u0000")).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${((parseInt(h[16]!, 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
