// Stage: cancellation and call (/v<N>) — the route's handler makes its upstream calls with the request's
// deadline, its metadata (upstream-metadata.ts) and its cancellation: a client that goes away cancels
// the gRPC calls and everything below them (api.ts says when it went).
import { RequestCancellation } from "../runtime/cancellation.js";
import type { EdgeCache } from "../runtime/edge-cache.js";
import type { LiveFanout } from "../runtime/live-fanout.js";
import type { RouteResult } from "../runtime/route.js";
import type { Upstreams } from "../upstreams.js";
import type { ApiExchange } from "./api-exchange.js";
import type { UpstreamMetadata } from "./upstream-metadata.js";

export interface CallStageOptions {
  upstreams: Upstreams;
  fanout: LiveFanout;
  edgeCache: EdgeCache | undefined;
  upstreamMetadata: UpstreamMetadata;
}

/** Runs the route's handler for a routed, admitted and checked request: its representation and status. */
export type CallRoute = (x: ApiExchange) => Promise<RouteResult>;

export function callStage({ upstreams, fanout, edgeCache, upstreamMetadata }: CallStageOptions): CallRoute {
  function invoke(x: ApiExchange, metadata: Record<string, string>): Promise<RouteResult> {
    const cancel = x.cancellation!;
    const record = x.record;
    return x.route!.handler({
      params: x.params,
      body: x.body,
      lines: x.lines,
      caller: x.caller,
      eventStream: x.liveStream,
      upstreams,
      path: x.pathname,
      version: x.version,
      base: `/v${x.pathMajor}`,
      headers: x.req.headers,
      callOptions: () => ({ signal: cancel.callSignal, timeoutMs: x.deadlineAt - Date.now(), headers: metadata }),
      streamCallOptions: () => ({ signal: cancel.signal, headers: metadata }),
      fanout,
      edgeCache,
      cacheResult: (result) => (record.cache = result),
    });
  }

  return function callRoute(x) {
    const cancel = (x.cancellation = new RequestCancellation());
    if (x.gone) cancel.abort(); // it left while the request was being read or checked
    const metadata = upstreamMetadata(x, x.route!.upstream);
    return metadata instanceof Promise ? metadata.then((m) => invoke(x, m)) : invoke(x, metadata);
  };
}
