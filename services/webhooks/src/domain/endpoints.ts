// Endpoint rules, without I/O: who may manage endpoints, what an endpoint's URL and event types may
// be, and how a secret is rotated.
import { DomainError } from "@switchyard/platform/domain-error.js";
import { requireRole, type Caller } from "@switchyard/platform/caller.js";
import { addressRefusal, literalAddressOf, type DestinationPolicy } from "./destinations.js";

/** The events an endpoint can ask for. Each service makes its own: payments the first two, orders the rest. */
export const EVENT_TYPES = [
  "payment.succeeded",
  "refund.succeeded",
  "order.paid",
  "order.shipped",
  "order.cancelled",
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export const URL_MAX_LENGTH = 2048;
/** How long the secret before a rotation keeps signing beside the new one. */
export const PREVIOUS_SECRET_VALID_MS = 24 * 60 * 60 * 1000;

/** Only a tenant's admins manage its endpoints (a member: 403; another tenant's endpoint is never found). */
export function requireEndpointAdmin(caller: Caller): void {
  requireRole(caller, "admin");
}

const urlRefused = (why: string) => new DomainError("RULE_VIOLATION", `url ${why}`, { field: "url" });

/**
 * The URL as it will be called: absolute, https (http only where the operator allows it), without
 * credentials or fragment, at most URL_MAX_LENGTH characters; a host written as an address must be
 * one the policy allows (a name is resolved and checked by the caller: that takes I/O).
 */
export function validateEndpointUrl(raw: string, policy: DestinationPolicy): URL {
  if (raw.length === 0 || raw.length > URL_MAX_LENGTH) throw urlRefused(`must be 1 to ${URL_MAX_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw urlRefused("must be an absolute URL");
  }
  if (url.protocol !== "https:" && !(url.protocol === "http:" && policy.allowPlainHttp))
    throw urlRefused(policy.allowPlainHttp ? "must be http or https" : "must be https");
  if (url.username !== "" || url.password !== "") throw urlRefused("must not carry credentials");
  if (url.hash !== "") throw urlRefused("must not have a fragment");
  const literal = literalAddressOf(url.hostname);
  if (literal !== undefined) {
    const refusal = addressRefusal(literal, policy);
    if (refusal) throw urlRefused(`points to a ${refusal} address, which is not reachable from here`);
  }
  return url;
}

/** A destination name resolved to `addresses`: refused when it resolves to none, or to any address the policy refuses. */
export function checkResolvedAddresses(
  hostname: string,
  addresses: readonly string[],
  policy: DestinationPolicy,
): void {
  if (addresses.length === 0) throw urlRefused(`host ${hostname} does not resolve`);
  for (const address of addresses) {
    const refusal = addressRefusal(address, policy);
    if (refusal)
      throw urlRefused(`host ${hostname} resolves to a ${refusal} address, which is not reachable from here`);
  }
}

/** Known types, at least one, each once (in the order given). */
export function validateEventTypes(types: readonly string[]): EventType[] {
  if (types.length === 0)
    throw new DomainError("RULE_VIOLATION", "event_types must name at least one event type", { field: "event_types" });
  const unknown = types.filter((t) => !(EVENT_TYPES as readonly string[]).includes(t));
  if (unknown.length > 0)
    throw new DomainError(
      "RULE_VIOLATION",
      `event_types: unknown type ${unknown[0]}; the types are ${EVENT_TYPES.join(", ")}`,
      { field: "event_types" },
    );
  return [...new Set(types as EventType[])];
}
