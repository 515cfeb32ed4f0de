// The edge's first step: which part of it answers a request — the fixed paths (/healthz, /readyz,
// /versions, /metrics), the API reference (/docs), a CORS preflight, the browser proxy (/rpc/…, its
// own route and representation over the shared stages), or the API (/v<N>/…, pipeline/api.ts).
import type { IncomingMessage, ServerResponse } from "node:http";
import { writeMetrics } from "@switchyard/platform/metrics.js";
import { clientAddress } from "./runtime/client-address.js";
import type { CorsPolicy } from "./runtime/cors.js";
import type { RequestRecord } from "./runtime/observability.js";
import { sendJson, setHeaders, type ResponseHeaders } from "./runtime/respond.js";
import { versionsJson, type PublishedVersion } from "./runtime/versions.js";
import type { DocsSite } from "./docs.js";
import { RPC_PREFIX } from "./rpc/allow-list.js";
import type { RpcProxy } from "./rpc/front.js";
import type { ServeApi } from "./pipeline/api.js";

export interface DispatchOptions {
  versions: readonly PublishedVersion[];
  docs: DocsSite;
  cors: CorsPolicy;
  rpc: RpcProxy;
  serveApi: ServeApi;
  /** /readyz: ready while it serves; draining before exit takes it out of rotation. */
  answerReadiness(res: ServerResponse, headers: ResponseHeaders): Promise<void>;
  trustedProxyHops: number;
}

/** Answers one request; `headers`: what the answer carries so far (its request id). */
export type Dispatch = (
  req: IncomingMessage,
  res: ServerResponse,
  record: RequestRecord,
  headers: ResponseHeaders,
) => Promise<void> | void;

export function dispatchStage({
  versions,
  docs,
  cors,
  rpc,
  serveApi,
  answerReadiness,
  trustedProxyHops,
}: DispatchOptions): Dispatch {
  return function dispatch(req, res, record, headers) {
    const url = req.url ?? "/";
    const q = url.indexOf("?");
    const pathname = q === -1 ? url : url.slice(0, q);
    const method = req.method ?? "GET";
    if (pathname === "/healthz") return sendJson(res, { status: 200, body: { status: "ok" }, headers });
    if (pathname === "/readyz") return answerReadiness(res, headers);
    if (pathname === "/versions" && (method === "GET" || method === "HEAD"))
      return sendJson(res, { status: 200, body: versionsJson(versions), headers });
    if (pathname === "/metrics" && (method === "GET" || method === "HEAD")) {
      setHeaders(res, headers);
      return writeMetrics(res);
    }
    // The API reference (/docs): static pages, outside the versions and their quotas.
    if (docs.handles(pathname)) {
      setHeaders(res, headers);
      return docs.serve(req, res, pathname);
    }
    if (cors.handle(req, res, pathname, headers)) return;
    const address = clientAddress(req, trustedProxyHops);
    if (pathname.startsWith(`${RPC_PREFIX}/`)) {
      record.route = rpc.routeOf(pathname);
      setHeaders(res, headers);
      return rpc.handle(req, res, address, record);
    }
    return serveApi({ req, res, record, headers, address, pathname, search: q === -1 ? "" : url.slice(q + 1) });
  };
}
