// Stage: upstream metadata — what goes with every call made for the request (runtime/upstream-headers.ts):
// its id, the caller's own token, and to identity alone the client's address with the gateway's own
// service token vouching for it (fetched only for those calls: the others need no promise).
import type { ServiceCredentials } from "@switchyard/platform/service-credentials.js";
import { forwardsClientAddress, upstreamHeaders } from "../runtime/upstream-headers.js";
import type { UpstreamName } from "../upstreams.js";
import type { EdgeCall } from "./edge-call.js";

/** The metadata of the call's upstream calls to `upstream`: at once, or once the gateway's token is at hand. */
export type UpstreamMetadata = (
  call: EdgeCall,
  upstream: UpstreamName,
) => Record<string, string> | Promise<Record<string, string>>;

export function upstreamMetadataStage(ownCredentials: ServiceCredentials): UpstreamMetadata {
  async function withGatewayToken(call: EdgeCall, upstream: UpstreamName): Promise<Record<string, string>> {
    const token = await ownCredentials.token();
    return upstreamHeaders(upstream, call.caller, call, token);
  }
  return function upstreamMetadata(call, upstream) {
    return forwardsClientAddress(upstream)
      ? withGatewayToken(call, upstream)
      : upstreamHeaders(upstream, call.caller, call);
  };
}
