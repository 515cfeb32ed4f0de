// The metadata of each call the gateway makes for a request (/v1 and /rpc alike): the request id and
// its priority (the route's, never the client's); the caller's own token, which the service verifies again; and the client's address, to identity alone
// (it counts failed logins by it), vouched for by the gateway's own service token — identity takes
// that address from the gateway and nobody else. The other services are told neither: the gateway's
// token never goes where it could stand for a user (keys, for one, are scoped by the acting service).
import { SERVICE_AUTHORIZATION, type Caller } from "@switchyard/platform/caller.js";
import { CLIENT_ADDRESS_HEADER } from "@switchyard/platform/grpc";
import { REQUEST_ID_HEADER } from "@switchyard/platform/request-id.js";
import { PRIORITY_HEADER, type Priority } from "@switchyard/platform/priority.js";
import type { UpstreamName } from "../upstreams.js";

/** The upstreams (by the gateway's name for them) that read the client's address. */
const READS_CLIENT_ADDRESS: ReadonlySet<UpstreamName> = new Set(["identity"]);

/**
 * `Bearer <token>` of a verified caller, made once per caller (the verifier answers a token it has seen
 * with the same Caller): ~400 bytes that each call would otherwise build and copy again.
 */
const bearerOfCaller = new WeakMap<Caller, string>();
export function bearerOf(caller: Caller): string {
  let header = bearerOfCaller.get(caller);
  if (header === undefined) bearerOfCaller.set(caller, (header = `Bearer ${caller.token}`));
  return header;
}

/** The request a call is made for: who sent it (as the trusted proxies saw), and its id. */
export interface UpstreamRequest {
  address: string;
  requestId: string;
  /** What it is shed as (the route's); none: default, and nothing is sent. */
  priority?: Priority;
}

/** Whether calls to `upstream` carry the client's address, and so the gateway's own token that vouches for it. */
export const forwardsClientAddress = (upstream: UpstreamName): boolean => READS_CLIENT_ADDRESS.has(upstream);

/**
 * The metadata of a call to `upstream` (identity, payments, orders, content) made for `request`;
 * `gatewayToken` is the gateway's own service token, sent only where the address goes.
 */
export function upstreamHeaders(
  upstream: UpstreamName,
  caller: Caller | undefined,
  request: UpstreamRequest | undefined,
  gatewayToken?: string,
): Record<string, string> {
  const headers: Record<string, string> = {};
  if (request) {
    headers[REQUEST_ID_HEADER] = request.requestId;
    if (request.priority !== undefined && request.priority !== "default") headers[PRIORITY_HEADER] = request.priority;
    if (forwardsClientAddress(upstream)) {
      headers[CLIENT_ADDRESS_HEADER] = request.address;
      if (gatewayToken !== undefined) headers[SERVICE_AUTHORIZATION] = `Bearer ${gatewayToken}`;
    }
  }
  if (caller) headers.authorization = bearerOf(caller);
  return headers;
}
