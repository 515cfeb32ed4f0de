// The internal services identity issues service tokens to (OAuth 2.0 client credentials), from
// IDENTITY_SERVICE_CREDENTIALS="orders:<secret>[,name:<secret>…]". Only digests are kept; a name
// may be listed twice while its secret is being rotated.
import { createHash, timingSafeEqual } from "node:crypto";
import { SERVICE_NAME } from "@switchyard/platform/caller.js";

export const MIN_SECRET_LENGTH = 32;

export type ServiceClients = ReadonlyMap<string, readonly Buffer[]>;

const digest = (secret: string) => createHash("sha256").update(secret, "utf8").digest();

export function parseServiceClients(raw: string): ServiceClients {
  const clients = new Map<string, Buffer[]>();
  for (const entry of raw
    .split(",")
    .map((e) => e.trim())
    .filter(Boolean)) {
    const colon = entry.indexOf(":");
    const name = entry.slice(0, colon);
    const secret = entry.slice(colon + 1);
    if (colon < 0 || !SERVICE_NAME.test(name))
      throw new Error("expected name:secret entries, the name a lower-case service name");
    if (secret.length < MIN_SECRET_LENGTH)
      throw new Error(`the secret of "${name}" is shorter than ${MIN_SECRET_LENGTH} characters`);
    clients.set(name, [...(clients.get(name) ?? []), digest(secret)]);
  }
  return clients;
}

/** Whether the secret is one of the client's (constant time per candidate). */
export function isServiceClient(clients: ServiceClients, clientId: string, secret: string): boolean {
  const given = digest(secret);
  let match = false;
  for (const known of clients.get(clientId) ?? []) match = timingSafeEqual(known, given) || match;
  return match;
}
