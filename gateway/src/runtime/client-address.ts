// Who is on the other end of a request, as far as it can be known: the socket's peer — or, behind
// N trusted proxies (GATEWAY_TRUSTED_PROXY_HOPS, Envoy's xff_num_trusted_hops), the N-th address
// from the right of X-Forwarded-For, the one the outermost trusted proxy saw. Entries left of it
// were written by the client and are never trusted.
import type { IncomingMessage } from "node:http";

export function clientAddress(req: IncomingMessage, trustedHops: number): string {
  const peer = req.socket.remoteAddress ?? "unknown";
  if (trustedHops === 0) return peer;
  const header = req.headers["x-forwarded-for"];
  // Every X-Forwarded-For line counts, in order (node joins repeated headers with ", ").
  const hops = (Array.isArray(header) ? header.join(",") : (header ?? ""))
    .split(",")
    .map((h) => h.trim())
    .filter(Boolean);
  // Fewer entries than trusted proxies: the request did not come through all of them.
  return hops.length >= trustedHops ? hops[hops.length - trustedHops]! : peer;
}
