// Endpoint signing secrets: made as Standard Webhooks writes them (`whsec_` and 32 random bytes in
// base64), and sealed at rest as identity seals its signing keys (AES-256-GCM under
// WEBHOOK_SECRET_ENCRYPTION_KEY, the endpoint's id bound in). Without a key — embedded storage only,
// the settings refuse a database server without one — they are kept as they are.
import { randomBytes } from "node:crypto";
import { isSealed, seal, unseal, type SealedKind } from "@switchyard/platform/sealing.js";

export const SECRET_PREFIX = "whsec_";
const KIND: SealedKind = { what: "the secret of endpoint", keySetting: "WEBHOOK_SECRET_ENCRYPTION_KEY" };

export function newEndpointSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString("base64")}`;
}

export class SecretBox {
  constructor(private readonly key: Buffer | undefined) {}

  /** The secret as stored for the row `boundTo`. */
  seal(secret: string, boundTo: string): string {
    return this.key ? seal(secret, boundTo, this.key) : secret;
  }

  open(stored: string, boundTo: string): string {
    if (!isSealed(stored)) return stored;
    if (!this.key) throw new Error(`${KIND.what} ${boundTo} is sealed, and ${KIND.keySetting} is not set`);
    return unseal(stored, boundTo, this.key, KIND);
  }
}
