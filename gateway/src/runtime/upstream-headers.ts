// The metadata of each call the gateway makes for a request (/v1 and /rpc alike): the request id; the
// caller's own token, which the service verifies again; and the client's address, to identity alone
// (it counts failed logins by it) — the other services are not told who is on the other end.
import type { Caller } from "@switchyard/platform/caller.js";
import { CLIENT_ADDRESS_HEADER } from "@switchyard/platform/grpc";
import { REQUEST_ID_HEADER } from "@switchyard/platform/request-id.js";
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
}

/** The metadata of a call to `upstream` (identity, payments, orders, content) made for `request`. */
export function upstreamHeaders(upstream: UpstreamName, caller: Caller | undefined, request: UpstreamRequest | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  if (request) {
    headers[REQUEST_ID_HEADER] = request.requestId;
    if (READS_CLIENT_ADDRESS.has(upstream)) headers[CLIENT_ADDRESS_HEADER] = request.address;
  }
  if (caller) headers.authorization = bearerOf(caller);
  return headers;
}
