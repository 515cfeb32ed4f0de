// The browser proxy at /rpc/<package.Service>/<Method>, the edge's second front: connect-node speaks
// the Connect protocol (JSON and binary) and gRPC-Web to the page, and each allowed call
// (allow-list.ts) goes on upstream (forward.ts). The edge's lifecycle is /v1's, run by one interceptor
// (lifecycle-interceptor.ts); the proxy's own are its route — the allow-list — and how it says a
// refusal (refuse.ts). Client and bidirectional streaming cannot cross a browser (no full-duplex
// HTTP in fetch) and answer `unimplemented` saying so. Authorization stays with the services, which
// see the caller's own token.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createConnectRouter, createContextValues } from "@connectrpc/connect";
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from "@connectrpc/connect-node";
import type { Upstreams } from "../upstreams.js";
import type { QuotaRecord } from "../pipeline/edge-call.js";
import type { EdgePolicy } from "../pipeline/edge-policy.js";
import { ALLOWED_METHODS, RPC_PREFIX, rpcRouteOf } from "./allow-list.js";
import { RPC_CALL, RpcCall } from "./call.js";
import { forwardAllowed } from "./forward.js";
import { lifecycleInterceptor } from "./lifecycle-interceptor.js";
import { checkedMessage } from "./message-checks.js";
import { refuse } from "./refuse.js";

export interface RpcProxyOptions {
  upstreams: Upstreams;
  /** The edge's lifecycle and stages, the same /v1 runs. */
  policy: EdgePolicy;
  maxBodyBytes: number;
}

export interface RpcProxy {
  /** Serves one request under /rpc/ — its client address (as /v1 reads it) and access record given. */
  handle(req: IncomingMessage, res: ServerResponse, address: string, record: QuotaRecord): void;
  /** The route a path counts under in metrics and the access log: a method's path, or one name for all others (bounded). */
  routeOf(path: string): string;
}

const notThroughBrowsers = (service: DescService, method: DescMethod) =>
  new ConnectError(
    `${service.typeName}/${method.name} is ${method.methodKind === "bidi_streaming" ? "bidirectional" : "client"} streaming, which is not available through the browser proxy (a browser cannot stream a request): call it over gRPC`,
    Code.Unimplemented,
  );

/** The browser proxy for /rpc/…: Connect (JSON, binary) and gRPC-Web, each call forwarded upstream. */
export function rpcProxy({ upstreams, policy, maxBodyBytes }: RpcProxyOptions): RpcProxy {
  const allowed = [...ALLOWED_METHODS.values()];
  const router = createConnectRouter({
    interceptors: [lifecycleInterceptor(policy, new Map(allowed.map((a) => [a.method, a.upstream])))],
    readMaxBytes: maxBodyBytes,
    acceptCompression: [compressionGzip, compressionBrotli],
    // Browsers: Connect and gRPC-Web only (plain gRPC goes to the services themselves).
    grpc: false,
  });
  // Only the allowed methods exist here: any other path is answered `unimplemented` (see `handle`).
  forwardAllowed(router, allowed, { upstreams, deadline: policy.deadline });
  const handlers = new Map(router.handlers.map((h) => [`${RPC_PREFIX}${h.requestPath}`, h]));

  return {
    handle(req, res, address, record) {
      const path = (req.url ?? "").split("?")[0]!;
      const found = ALLOWED_METHODS.get(path);
      if (!found) {
        const message = `no method ${path.slice(RPC_PREFIX.length + 1)} is served through the browser proxy`;
        return refuse(req, res, new ConnectError(message, Code.Unimplemented));
      }
      const kind = found.method.methodKind;
      // Answered here, in the protocol's format: connect-node would refuse a bidirectional stream over HTTP/1.1 with a 505.
      if (kind === "client_streaming" || kind === "bidi_streaming")
        return refuse(req, res, notThroughBrowsers(found.service, found.method));
      const handler = handlers.get(path)!;
      const values = createContextValues().set(RPC_CALL, new RpcCall(address, record, {}));
      const universal = universalRequestFromNodeRequest(req, res, undefined, values);
      void checkedMessage(universal, found.method, maxBodyBytes)
        .then(async (checked) => {
          if ("refusal" in checked) return refuse(req, res, checked.refusal);
          await universalResponseToNodeResponse(await handler(checked.request), res);
        })
        .catch(() => {
          // The call was answered as far as it could be (a client gone mid-answer); nothing more to send.
          if (!res.headersSent) refuse(req, res, new ConnectError("the browser proxy could not answer", Code.Internal));
        });
    },
    routeOf: rpcRouteOf,
  };
}
