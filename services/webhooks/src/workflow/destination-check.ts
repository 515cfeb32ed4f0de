// A destination's name, resolved now and checked: every address it resolves to must be one the
// policy allows (domain/destinations.ts). This is the check at registration; each attempt checks
// again the address it actually connects to, so a name that later resolves inward gains nothing.
import { lookup } from "node:dns/promises";
import { checkResolvedAddresses } from "../domain/endpoints.js";
import { literalAddressOf, type DestinationPolicy } from "../domain/destinations.js";

/** Every address a name resolves to (none when it does not resolve). */
export type ResolveName = (hostname: string) => Promise<string[]>;

export const resolveWithSystemDns: ResolveName = async (hostname) => {
  try {
    return (await lookup(hostname, { all: true, verbatim: true })).map((a) => a.address);
  } catch {
    return [];
  }
};

export async function checkDestination(url: URL, policy: DestinationPolicy, resolve: ResolveName): Promise<void> {
  // An address written in the URL was checked with the URL itself.
  if (literalAddressOf(url.hostname) !== undefined) return;
  checkResolvedAddresses(url.hostname, await resolve(url.hostname), policy);
}
