// Where a webhook may be sent, without I/O: only to public unicast addresses, over https — unless the
// operator allows some networks (loopback for a local mesh and the tests) or plain http. The same
// rule is applied to every address a destination's name resolves to when it is registered, and to
// the address an attempt actually connects to.
import ipaddr from "ipaddr.js";

export interface DestinationPolicy {
  /** Plain http:// destinations (npm start and the tests; never deploy/). */
  readonly allowPlainHttp: boolean;
  /** Networks allowed although not public, e.g. 127.0.0.0/8 and ::1/128 for a local mesh. */
  readonly allowedNetworks: readonly AllowedNetwork[];
}

export type AllowedNetwork = [ipaddr.IPv4 | ipaddr.IPv6, number];

export const CLOSED_POLICY: DestinationPolicy = { allowPlainHttp: false, allowedNetworks: [] };

/** A CIDR list ("127.0.0.0/8, ::1/128"), for the operator's setting. */
export function parseNetworks(raw: string): AllowedNetwork[] {
  return raw
    .split(",")
    .map((part) => part.trim())
    .filter((part) => part !== "")
    .map((cidr) => {
      if (!ipaddr.isValidCIDR(cidr)) throw new Error(`expected networks as CIDR (10.0.0.0/8, ::1/128), got "${cidr}"`);
      return ipaddr.parseCIDR(cidr);
    });
}

/**
 * Why an address may not be a destination (e.g. "loopback"), or undefined when it may. An IPv4
 * address written as IPv6 (::ffff:a.b.c.d) is judged as the IPv4 address it is; every special range
 * (private, link-local — cloud metadata at 169.254.169.254 among them —, carrier-grade NAT, multicast,
 * reserved, translation prefixes that embed another address…) is refused, only plain unicast passes —
 * for IPv6 only global unicast (2000::/3): the rest of that space is unassigned or, like the deprecated
 * IPv4-compatible ::a.b.c.d written in hex (::a00:1), a way to name an inward address that no range
 * of the library's covers.
 */
export function addressRefusal(address: string, policy: DestinationPolicy): string | undefined {
  if (!ipaddr.isValid(address)) return "not an IP address";
  const parsed = ipaddr.process(address);
  const allowed = policy.allowedNetworks.some(
    ([network, bits]) => network.kind() === parsed.kind() && parsed.match(network, bits),
  );
  if (allowed) return undefined;
  const range = parsed.range();
  if (range !== "unicast") return range;
  return parsed.kind() === "ipv6" && !parsed.match(GLOBAL_UNICAST_V6) ? "notGlobalUnicast" : undefined;
}

const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR("2000::/3");

/** An IP literal in a URL's host ([::1] written with brackets), or undefined for a name. */
export function literalAddressOf(hostname: string): string | undefined {
  const bare = hostname.startsWith("[") && hostname.endsWith("]") ? hostname.slice(1, -1) : hostname;
  return ipaddr.isValid(bare) ? bare : undefined;
}
