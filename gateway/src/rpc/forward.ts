// Forwarding: each allowed call goes on over the gateway's grpc-js channels as plain gRPC — generic
// from the service descriptors, no code per method. Unary and server-streaming methods pass through
// (client and bidirectional streaming never reach here: refused in front.ts). What fails upstream —
// or on the way, with either deadline (connect-node's from Connect-Timeout-Ms, grpc-js's on the
// channel) — reaches the page as /v1 would say it (toRpcError): a refusal of the request as the
// service raised it, anything else without the transport's text (addresses, sizes).
import type { DescMethod, DescMethodServerStreaming, DescMethodUnary } from "@bufbuild/protobuf";
import type { CallOptions, ConnectRouter, HandlerContext } from "@connectrpc/connect";
import { toRpcError } from "../runtime/errors.js";
import type { Deadline } from "../pipeline/deadline.js";
import type { Upstreams } from "../upstreams.js";
import type { AllowedMethod } from "./allow-list.js";
import { RPC_CALL } from "./call.js";

/** An upstream client's method, called generically: the request, then its options. */
type UpstreamMethod = (request: unknown, options: CallOptions) => unknown;

export interface ForwardOptions {
  upstreams: Upstreams;
  /** The caller's deadline, capped as /v1 caps it (pipeline/deadline.ts). */
  deadline: Deadline;
}

/** Adds a forwarding handler for each allowed unary and server-streaming method to the router. */
export function forwardAllowed(
  router: ConnectRouter,
  allowed: Iterable<AllowedMethod>,
  { upstreams, deadline }: ForwardOptions,
): void {
  /** What goes upstream with a call: its metadata (drawn up by the edge's lifecycle), its deadline, its cancellation. */
  function callOptions(ctx: HandlerContext, method: DescMethod): CallOptions {
    const asked = ctx.timeoutMs();
    const timeoutMs = asked !== undefined || method.methodKind === "unary" ? deadline(asked) : undefined;
    const headers = ctx.values.get(RPC_CALL)?.metadata ?? {};
    return { headers, signal: ctx.signal, ...(timeoutMs !== undefined ? { timeoutMs } : {}) };
  }

  for (const { method, upstream } of allowed) {
    const client = upstreams[upstream] as unknown as Record<string, UpstreamMethod>;
    const call = client[method.localName]!;
    if (method.methodKind === "unary") {
      router.rpc(method as DescMethodUnary, (req: unknown, ctx: HandlerContext) =>
        (call(req, callOptions(ctx, method)) as Promise<never>).catch((err: unknown) => {
          throw toRpcError(err, upstream);
        }),
      );
    } else if (method.methodKind === "server_streaming") {
      router.rpc(method as DescMethodServerStreaming, async function* (req: unknown, ctx: HandlerContext) {
        try {
          yield* call(req, callOptions(ctx, method)) as AsyncIterable<never>;
        } catch (err) {
          throw toRpcError(err, upstream);
        }
        // The upstream stream ends quietly when the caller's own deadline (connect-node's signal) cut
        // it before grpc-js's did: it did not end well, it ended for that reason.
        if (ctx.signal.aborted) throw toRpcError(ctx.signal.reason, upstream);
      });
    }
  }
}
