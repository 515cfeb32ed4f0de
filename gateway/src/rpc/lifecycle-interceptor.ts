// The edge's lifecycle (pipeline/edge-lifecycle.ts) for /rpc, as /v1 runs it: one connect-node
// interceptor around every call, so that a refusal arrives in the page's own protocol. The caller's
// token is verified (refused at once: every method would pass it on), the call enters (a place in the
// limit, the quota, a live stream's slot), its upstream metadata is drawn, and once answered — a
// live stream: once it ends — the lifecycle gives back what it holds, told how the answer went.
import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { toHttpError } from "../runtime/errors.js";
import type { EdgeCall } from "../pipeline/edge-call.js";
import type { EdgePolicy } from "../pipeline/edge-policy.js";
import type { UpstreamName } from "../upstreams.js";
import { RPC_CALL } from "./call.js";
import { rpcRefusal } from "./refuse.js";

/** `upstreamOf`: the upstream that answers each allowed method (allow-list.ts). */
export function lifecycleInterceptor(
  policy: EdgePolicy,
  upstreamOf: ReadonlyMap<DescMethod, UpstreamName>,
): Interceptor {
  return (next) => async (req) => {
    const call = req.contextValues.get(RPC_CALL)!;
    const verifying = policy.identify(call, req.header.get("authorization") ?? undefined);
    if (verifying) await verifying;
    // A token that is no good is refused at once: every method would pass it on.
    if (call.presentedToken && call.caller === undefined) {
      throw ConnectError.from(call.refusedToken, Code.Unauthenticated);
    }
    call.liveStream = req.method.methodKind === "server_streaming";
    const refused = await policy.enter(call);
    if (refused) throw rpcRefusal(refused, call);
    const upstream = upstreamOf.get(req.method)!;
    /** The call is answered: an error judged by the status /v1 gives it. */
    const finish = (err?: unknown) =>
      policy.finish(call, { upstreamWork: true, status: err === undefined ? 200 : toHttpError(err, upstream).status });
    try {
      const metadata = policy.upstreamMetadata(call, upstream);
      call.metadata = metadata instanceof Promise ? await metadata : metadata;
    } catch (err) {
      policy.finish(call, { upstreamWork: false, status: 500 });
      throw err;
    }
    let res;
    try {
      res = withQuota(await next(req), call);
    } catch (err) {
      finish(err);
      throw err;
    }
    if (!res.stream) {
      finish();
      return res;
    }
    // A live stream: its place back once open (long by design); its caller's slot while it lasts.
    policy.opened(call);
    const messages = res.message;
    return {
      ...res,
      message: (async function* () {
        let failure: unknown;
        try {
          yield* messages;
        } catch (err) {
          failure = err;
          throw err;
        } finally {
          // However it ended — done, failed, or the page gone (the iterator returned early).
          finish(failure);
        }
      })(),
    };
  };
}

/** The quota's headers on a call's answer. */
function withQuota<R extends { header: Headers }>(res: R, call: EdgeCall): R {
  for (const name in call.headers) res.header.set(name, call.headers[name]!);
  return res;
}
