// The browser proxy at /rpc/<package.Service>/<Method>: connect-node speaks the Connect protocol
// (JSON and binary) and gRPC-Web to the page, and each call goes on over the gateway's grpc-js
// channels as plain gRPC — generic from the service descriptors, no code per method. Unary and
// server-streaming methods pass through; client and bidirectional streaming cannot cross a browser
// (no full-duplex HTTP in fetch) and answer `unimplemented` saying so. Only the allow-listed methods
// are there at all: nothing operator-only or internal (key sets, revocations, service tokens).
//
// The edge's policy is /v1's — the same stages (pipeline/edge-policy.ts), composed once — applied in
// one interceptor so that a refusal arrives in the page's own protocol: the caller's token is verified
// (refused at once: every method would pass it on), the adaptive concurrency limit admits or sheds,
// the quota is drawn, a live stream takes one of its caller's stream slots, the caller's deadline
// (Connect-Timeout-Ms, grpc-timeout) is capped like X-Request-Timeout-Ms, and a page that goes away
// cancels the call. Only the route (the allow-list) and the representation are the proxy's own.
// Authorization stays with the services, which see the caller's own token.
import type { IncomingMessage, ServerResponse } from "node:http";
import {
  fromBinary,
  type DescMethod,
  type DescMethodServerStreaming,
  type DescMethodUnary,
  type DescService,
} from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createConnectRouter,
  createContextKey,
  createContextValues,
  type CallOptions,
  type ConnectRouter,
  type HandlerContext,
  type Interceptor,
} from "@connectrpc/connect";
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from "@connectrpc/connect-node";
import type { UniversalServerRequest } from "@connectrpc/connect/protocol";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { OrderService } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { errorCatalogue, type ErrorReason } from "@switchyard/platform/errors.js";
import type { UpstreamName, Upstreams } from "./upstreams.js";
import { toHttpError, toRpcError, type HttpError } from "./runtime/errors.js";
import { EdgeCall, type QuotaRecord } from "./pipeline/edge-call.js";
import type { EdgePolicy } from "./pipeline/edge-policy.js";

/**
 * What a page may call, by service: every method of the service's public API. Left out, and so
 * `unimplemented`: identity's GetJwks, WatchRevocations and CreateServiceToken (internal),
 * payments' ResolveIdempotencyKey (orders' own), and the operator and echo services entirely.
 */
export const BROWSER_METHODS: Readonly<Record<string, readonly string[]>> = {
  [IdentityService.typeName]: [
    "CreateSession",
    "GetSession",
    "DeleteSession",
    "GetTenant",
    "ListUsers",
    "CreateUser",
    "GetUser",
    "DeleteUser",
  ],
  [PaymentService.typeName]: [
    "CreatePayment",
    "GetPayment",
    "ListPayments",
    "CreateRefund",
    "GetRefund",
    "ListRefunds",
  ],
  [OrderService.typeName]: [
    "CreateOrder",
    "GetOrder",
    "UpdateOrder",
    "ListUserOrders",
    "PayOrder",
    "ShipOrder",
    "CancelOrder",
    "AddItem",
    "ListItems",
    "AddDiscount",
    "ListDiscounts",
    "TrackOrders",
  ],
  [ContentService.typeName]: [
    "CreateDocument",
    "GetDocument",
    "UpdateDocument",
    "CreatePost",
    "GetPost",
    "ListPosts",
    "WatchPosts",
    "ListCatalogItems",
    "BatchGetCatalogItems",
    "ImportItems",
    "CreateImportJob",
    "GetImportJob",
  ],
};

export const RPC_PREFIX = "/rpc";

export interface RpcProxyOptions {
  upstreams: Upstreams;
  /** The edge's shared stages, the same /v1 runs. */
  policy: EdgePolicy;
  maxBodyBytes: number;
}

/** A call's request, as the shared stages know it (made by the edge for each request under /rpc/). */
class RpcCall extends EdgeCall {
  /** The metadata of its upstream call (pipeline/upstream-metadata.ts). */
  metadata: Record<string, string> = {};
}

const CALL = createContextKey<RpcCall | undefined>(undefined, {
  description: "the request, as the edge's stages know it",
});

const notThroughBrowsers = (service: DescService, method: DescMethod) =>
  new ConnectError(
    `${service.typeName}/${method.name} is ${method.methodKind === "bidi_streaming" ? "bidirectional" : "client"} streaming, which is not available through the browser proxy (a browser cannot stream a request): call it over gRPC`,
    Code.Unimplemented,
  );

export interface RpcProxy {
  /** Serves one request under /rpc/ — its client address (as /v1 reads it) and access record given. */
  handle(req: IncomingMessage, res: ServerResponse, address: string, record: QuotaRecord): void;
  /** The route a path counts under in metrics and the access log: a method's path, or one name for all others (bounded). */
  routeOf(path: string): string;
}

/** The browser proxy for /rpc/…: Connect (JSON, binary) and gRPC-Web, each call forwarded upstream. */
export function rpcProxy(options: RpcProxyOptions): RpcProxy {
  const { policy } = options;
  /** Each service a page may reach, by the gateway's name for its upstream (whose client it calls). */
  const services: [DescService, UpstreamName][] = [
    [IdentityService, "identity"],
    [PaymentService, "payments"],
    [OrderService, "orders"],
    [ContentService, "content"],
  ];

  /** What goes upstream with a call: its metadata (drawn up by the edge's stages), its deadline, its cancellation. */
  function callOptions(ctx: HandlerContext, method: DescMethod): CallOptions {
    const asked = ctx.timeoutMs();
    const timeoutMs = asked !== undefined || method.methodKind === "unary" ? policy.deadline(asked) : undefined;
    const headers = ctx.values.get(CALL)?.metadata ?? {};
    return { headers, signal: ctx.signal, ...(timeoutMs !== undefined ? { timeoutMs } : {}) };
  }

  /** The methods a page may call, each with its upstream client's function. */
  const allowed = services.flatMap(([service, upstream]) => {
    const client = options.upstreams[upstream] as unknown as Record<string, (...args: unknown[]) => unknown>;
    return service.methods
      .filter((method) => BROWSER_METHODS[service.typeName]!.includes(method.name))
      .map((method) => ({ service, method, upstream, call: client[method.localName]! }));
  });
  const upstreamOf = new Map<DescMethod, UpstreamName>(allowed.map((a) => [a.method, a.upstream]));

  function routes(router: ConnectRouter): void {
    // Only the allowed methods exist here: any other path is answered `unimplemented` (see `handle`).
    // What fails upstream — or on the way, with either deadline (connect-node's from Connect-Timeout-Ms,
    // grpc-js's on the channel) — reaches the page as /v1 would say it (toRpcError): a refusal of the
    // request as the service raised it, anything else without the transport's text (addresses, sizes).
    for (const { method, upstream, call } of allowed) {
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
      // Client and bidirectional streaming are answered before the router (see `handle`).
    }
  }

  /** The edge's lifecycle, once for every call (as /v1 runs it), its refusals in the call's own protocol. */
  const edgeStages: Interceptor = (next) => async (req) => {
    const call = req.contextValues.get(CALL)!;
    const verifying = policy.identify(call, req.header.get("authorization") ?? undefined);
    if (verifying) await verifying;
    // A token that is no good is refused at once: every method would pass it on.
    if (call.presentedToken && call.caller === undefined) {
      throw ConnectError.from(call.refusedToken, Code.Unauthenticated);
    }
    call.liveStream = req.method.methodKind === "server_streaming";
    const refused = await policy.enter(call);
    if (refused) throw refusal(refused, call);
    const upstream = upstreamOf.get(req.method)!;
    /** The call is answered: the lifecycle gives back what it holds, told how the answer went. */
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

  const router = createConnectRouter({
    interceptors: [edgeStages],
    readMaxBytes: options.maxBodyBytes,
    acceptCompression: [compressionGzip, compressionBrotli],
    // Browsers: Connect and gRPC-Web only (plain gRPC goes to the services themselves).
    grpc: false,
  });
  routes(router);
  const handlers = new Map(router.handlers.map((h) => [`${RPC_PREFIX}${h.requestPath}`, h]));

  const methods = new Map(allowed.map((a) => [`${RPC_PREFIX}/${a.service.typeName}/${a.method.name}`, a]));
  return {
    handle(req, res, address, record) {
      const path = (req.url ?? "").split("?")[0]!;
      const found = methods.get(path);
      if (!found)
        return refuse(
          req,
          res,
          "unimplemented",
          `no method ${path.slice(RPC_PREFIX.length + 1)} is served through the browser proxy`,
          404,
        );
      const kind = found.method.methodKind;
      // Answered here, in the protocol's format: connect-node would refuse a bidirectional stream over HTTP/1.1 with a 505.
      if (kind === "client_streaming" || kind === "bidi_streaming")
        return refuse(req, res, "unimplemented", notThroughBrowsers(found.service, found.method).rawMessage, 404);
      const handler = handlers.get(path)!;
      const values = createContextValues().set(CALL, new RpcCall(address, record, {}));
      const universal = universalRequestFromNodeRequest(req, res, undefined, values);
      void checkedMessage(universal, found.method, options.maxBodyBytes)
        .then(async (checked) => {
          if ("refusal" in checked) return refuse(req, res, checked.refusal.code, checked.refusal.message, 400);
          await universalResponseToNodeResponse(await handler(checked.request), res);
        })
        .catch(() => {
          // The call was answered as far as it could be (a client gone mid-answer); nothing more to send.
          if (!res.headersSent) refuse(req, res, "internal", "the browser proxy could not answer", 500);
        });
    },
    routeOf: (path) => (methods.has(path) ? path : `${RPC_PREFIX}/{other}`),
  };
}

/** A refusal of the edge's stages as the page's protocol says it, with the quota as it stands (as /v1's). */
function refusal(err: HttpError, call: EdgeCall): ConnectError {
  const code = errorCatalogue[err.code as ErrorReason].code;
  return new ConnectError(err.message, code, { ...call.headers, ...err.headers });
}

/** The quota's headers on a call's answer. */
function withQuota<R extends { header: Headers }>(res: R, call: EdgeCall): R {
  for (const name in call.headers) res.header.set(name, call.headers[name]!);
  return res;
}

/**
 * An error in the caller's protocol, without reading the request: gRPC-Web as a trailers-only answer
 * (HTTP 200, grpc-status); a Connect stream as its end-of-stream message; Connect unary as its JSON
 * error with `status` (404 for unimplemented — what a Connect client reads as such — 400 otherwise:
 * refusals of the caller's input are never a 5xx).
 */
function refuse(
  req: IncomingMessage,
  res: ServerResponse,
  code: "unimplemented" | "invalid_argument" | "resource_exhausted" | "internal",
  message: string,
  status: number,
): void {
  req.resume();
  const type = String(req.headers["content-type"] ?? "").toLowerCase();
  if (type.startsWith("application/grpc-web")) {
    const grpcStatus = {
      unimplemented: Code.Unimplemented,
      invalid_argument: Code.InvalidArgument,
      resource_exhausted: Code.ResourceExhausted,
      internal: Code.Internal,
    }[code];
    res.writeHead(200, {
      "content-type": type.startsWith("application/grpc-web-text")
        ? "application/grpc-web-text+proto"
        : "application/grpc-web+proto",
      "grpc-status": String(grpcStatus),
      "grpc-message": encodeURIComponent(message),
    });
    res.end();
    return;
  }
  if (type.startsWith("application/connect+")) {
    const json = Buffer.from(JSON.stringify({ error: { code, message } }));
    const envelope = Buffer.alloc(5 + json.length);
    envelope.writeUInt8(0b10, 0); // end of stream
    envelope.writeUInt32BE(json.length, 1);
    json.copy(envelope, 5);
    res.writeHead(200, { "content-type": type.split(";")[0]! }).end(envelope);
    return;
  }
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify({ code, message }));
}

/**
 * A binary request message checked before the call is dispatched: connect-node reports a message it
 * cannot parse as `internal` (its parser serves clients and servers alike), but a malformed request
 * is the caller's error — `invalid_argument`. Binary Connect (unary `application/proto`, streaming
 * `application/connect+proto`) and gRPC-Web bodies are read (up to the body limit) and parsed once;
 * compressed or JSON ones go on unread (connect-node reports JSON it cannot parse as invalid_argument).
 */
async function checkedMessage(
  request: UniversalServerRequest,
  method: DescMethod,
  maxBytes: number,
): Promise<
  | { request: UniversalServerRequest }
  | { refusal: { code: "invalid_argument" | "resource_exhausted"; message: string } }
> {
  const type = (request.header.get("content-type") ?? "").toLowerCase().split(";")[0]!.trim();
  const enveloped =
    type === "application/connect+proto" || type === "application/grpc-web" || type === "application/grpc-web+proto";
  if (
    (type !== "application/proto" && !enveloped) ||
    request.header.get("content-encoding") ||
    !isAsyncIterable(request.body)
  )
    return { request };
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body) {
    size += chunk.byteLength;
    if (size > maxBytes)
      return { refusal: { code: "resource_exhausted", message: `the request is larger than ${maxBytes} bytes` } };
    chunks.push(chunk);
  }
  const bytes = Buffer.concat(chunks);
  let message: Uint8Array = bytes;
  if (enveloped) {
    const length = bytes.length >= 5 ? bytes.readUInt32BE(1) : -1;
    if (length < 0 || bytes.length !== 5 + length)
      return { refusal: { code: "invalid_argument", message: "the request is not one enveloped message" } };
    if ((bytes[0]! & 0b1) !== 0) return { request: { ...request, body: once(bytes) } }; // compressed: connect-node reads it
    message = bytes.subarray(5);
  }
  try {
    fromBinary(method.input, message);
  } catch (err) {
    return {
      refusal: {
        code: "invalid_argument",
        message: `the request is not a valid ${method.input.typeName}: ${err instanceof Error ? err.message : String(err)}`,
      },
    };
  }
  return { request: { ...request, body: once(bytes) } };
}

function isAsyncIterable(value: unknown): value is AsyncIterable<Uint8Array> {
  return typeof value === "object" && value !== null && Symbol.asyncIterator in value;
}

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}
