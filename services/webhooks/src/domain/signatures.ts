// Standard Webhooks signatures (https://www.standardwebhooks.com/): the headers a delivery carries.
// `webhook-signature` is `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` under each secret
// that signs now — two, space-separated, while a rotation runs — so a receiver holding either passes.
import { createHmac } from "node:crypto";
import { SECRET_PREFIX } from "../endpoint-secrets.js";

export interface SignedHeaders {
  "webhook-id": string;
  "webhook-timestamp": string;
  "webhook-signature": string;
}

/** The key of a `whsec_<base64>` secret. */
function keyOf(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, "base64");
}

/** The headers of one message: `id` (the event's), `timestampSeconds` (when it is sent), under each of `secrets`. */
export function signedHeaders(
  message: { id: string; timestampSeconds: number; body: string },
  secrets: readonly string[],
): SignedHeaders {
  const timestamp = String(message.timestampSeconds);
  const content = `${message.id}.${timestamp}.${message.body}`;
  const signatures = secrets.map((s) => `v1,${createHmac("sha256", keyOf(s)).update(content).digest("base64")}`);
  return { "webhook-id": message.id, "webhook-timestamp": timestamp, "webhook-signature": signatures.join(" ") };
}
