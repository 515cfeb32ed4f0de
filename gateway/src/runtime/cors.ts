// CORS on the public API (/v1/…, every version, and the /rpc browser proxy): only the exact origins
// of GATEWAY_CORS_ORIGINS get CORS headers — none when it is unset. A preflight is answered here,
// before quotas and routing (it is no request of the API); an origin not on the list gets a 204
// without CORS headers, which the browser reads as a refusal.
import type { IncomingMessage, ServerResponse } from "node:http";
import { cors as connectCors } from "@connectrpc/connect";
import { appendHeader, type ResponseHeaders } from "./respond.js";

/** What a page may read of an answer: entity tags, locations, quotas, replays, deprecation, ignored query parameters, and the gRPC-Web/Connect trailers. */
const EXPOSED_HEADERS = [
  "ETag",
  "Location",
  "Retry-After",
  "X-RateLimit-Limit",
  "X-RateLimit-Remaining",
  "X-RateLimit-Reset",
  "Idempotent-Replayed",
  "Deprecation",
  "Sunset",
  "Link",
  "X-Request-Id",
  "X-Ignored-Query-Parameters",
  ...connectCors.exposedHeaders,
];
/** What a page may send: the API's own headers and those of the Connect and gRPC-Web protocols. */
const ALLOWED_HEADERS = [
  "Authorization",
  "Content-Type",
  "Accept",
  "Idempotency-Key",
  "If-Match",
  "If-None-Match",
  "Last-Event-ID",
  "X-Request-Timeout-Ms",
  ...connectCors.allowedHeaders,
];
const ALLOWED_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"];
/** How long a browser may keep a preflight's answer (2 hours: Chromium's own ceiling). */
const MAX_AGE_SECONDS = 7_200;

export interface CorsPolicy {
  /**
   * Adds the CORS headers an allowed origin gets to the answer's `headers`; answers a preflight
   * (true: the request is answered). Only paths under the API (`/v<N>/`, `/rpc/`) are concerned.
   */
  handle(req: IncomingMessage, res: ServerResponse, pathname: string, headers: ResponseHeaders): boolean;
}

const API_PATH = /^\/(?:v\d+|rpc)\//;

export function corsPolicy(origins: readonly string[]): CorsPolicy {
  const allowed = new Set(origins);
  const exposed = [...new Set(EXPOSED_HEADERS.map((h) => h.toLowerCase()))].join(", ");
  const allowHeaders = [...new Set(ALLOWED_HEADERS.map((h) => h.toLowerCase()))].join(", ");
  return {
    handle(req, res, pathname, headers) {
      if (allowed.size === 0 || !API_PATH.test(pathname)) return false;
      const origin = req.headers.origin;
      const preflight = req.method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined;
      // Answers differ by origin: caches must keep them apart.
      appendHeader(
        headers,
        "vary",
        preflight ? "Origin, Access-Control-Request-Method, Access-Control-Request-Headers" : "Origin",
      );
      const ok = typeof origin === "string" && allowed.has(origin);
      if (ok) headers["access-control-allow-origin"] = origin;
      if (!preflight) {
        if (ok) headers["access-control-expose-headers"] = exposed;
        return false;
      }
      req.resume();
      if (ok) {
        headers["access-control-allow-methods"] = ALLOWED_METHODS.join(", ");
        headers["access-control-allow-headers"] = allowHeaders;
        headers["access-control-max-age"] = String(MAX_AGE_SECONDS);
      }
      res.writeHead(204, headers).end();
      return true;
    },
  };
}

/** GATEWAY_CORS_ORIGINS: a comma-separated list of exact origins (scheme://host[:port]), each as a browser sends it. */
export function parseOrigins(raw: string): string[] {
  const origins = raw
    .split(",")
    .map((o) => o.trim())
    .filter((o) => o !== "");
  for (const origin of origins) {
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      throw new Error(`"${origin}" is not an origin (scheme://host[:port])`);
    }
    if ((url.protocol !== "http:" && url.protocol !== "https:") || url.origin !== origin) {
      throw new Error(
        `"${origin}" is not an origin as a browser sends it (scheme://host[:port], no path or trailing slash; e.g. ${url.origin})`,
      );
    }
  }
  return origins;
}
