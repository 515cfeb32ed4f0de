// How /rpc says a refusal, in the page's own protocol: the edge lifecycle's refusals as a ConnectError
// (connect-node writes it), and what is refused before connect-node reads the request — a method that
// is not there or cannot cross a browser, a body that is no message — written here, with connect's
// own protocol helpers for the envelope and the trailers.
import type { IncomingMessage, ServerResponse } from "node:http";
import { Code, ConnectError } from "@connectrpc/connect";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import { createEndStreamSerialization, endStreamFlag, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc-web";
import { errorCatalogue, type ErrorReason } from "@switchyard/platform/errors.js";
import type { HttpError } from "../runtime/errors.js";
import type { EdgeCall } from "../pipeline/edge-call.js";

/** A refusal of the edge's lifecycle as the page's protocol says it, with the quota as it stands (as /v1's). */
export function rpcRefusal(err: HttpError, call: EdgeCall): ConnectError {
  const code = errorCatalogue[err.code as ErrorReason].code;
  return new ConnectError(err.message, code, { ...call.headers, ...err.headers });
}

const endStream = createEndStreamSerialization(undefined);

/**
 * Connect unary's HTTP status for a refusal made before the request is read: 404 for unimplemented —
 * what a Connect client reads as such — 500 for the proxy's own failure, 400 otherwise: refusals of
 * the caller's input are never a 5xx.
 */
function unaryStatus(code: Code): number {
  if (code === Code.Unimplemented) return 404;
  return code === Code.Internal ? 500 : 400;
}

/**
 * A refusal in the caller's protocol, without reading the request: gRPC-Web as a trailers-only
 * answer (HTTP 200, grpc-status); a Connect stream as its end-of-stream message; Connect unary as its
 * JSON error, with the status above.
 */
export function refuse(req: IncomingMessage, res: ServerResponse, error: ConnectError): void {
  req.resume();
  const type = String(req.headers["content-type"] ?? "").toLowerCase();
  if (type.startsWith("application/grpc-web")) {
    const contentType = type.startsWith("application/grpc-web-text")
      ? "application/grpc-web-text+proto"
      : "application/grpc-web+proto";
    const trailers = setTrailerStatus(new Headers({ "content-type": contentType }), error);
    res.writeHead(200, Object.fromEntries(trailers)).end();
    return;
  }
  if (type.startsWith("application/connect+")) {
    const end = encodeEnvelope(endStreamFlag, endStream.serialize({ metadata: new Headers(), error }));
    res.writeHead(200, { "content-type": type.split(";")[0]! }).end(end);
    return;
  }
  res
    .writeHead(unaryStatus(error.code), { "content-type": "application/json" })
    .end(errorToJsonBytes(error, undefined));
}
