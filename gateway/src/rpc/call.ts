// One /rpc call as the edge's lifecycle knows it (pipeline/edge-call.ts), and what it adds: the
// metadata its upstream call carries. Made for each request under /rpc/ and handed to connect-node's
// handlers in the call's context values.
import { createContextKey } from "@connectrpc/connect";
import { EdgeCall } from "../pipeline/edge-call.js";

export class RpcCall extends EdgeCall {
  /** The metadata of its upstream call (pipeline/upstream-metadata.ts). */
  metadata: Record<string, string> = {};
}

/** Where the handlers find the call (set for every request, before the router). */
export const RPC_CALL = createContextKey<RpcCall | undefined>(undefined, {
  description: "the request, as the edge's stages know it",
});
