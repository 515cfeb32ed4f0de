// Writing responses: JSON bodies, and the error envelope with the headers its status needs.
//
// The headers an answer carries (its request id, the quota, Vary, CORS, deprecation, the negotiated
// media type, the route's own) are gathered in a plain object while the request is handled and
// written once, with the status. Nothing is set on the ServerResponse before: Node then writes the
// object as it is, instead of copying every header through its per-header store (setHeader), which
// was ~5 % of a read's cost at the edge.
import type { ServerResponse } from "node:http";
import type { HttpError } from "./errors.js";

/** An answer's headers so far, by lower-case name. */
export type ResponseHeaders = Record<string, string>;

/** Adds `value` to a list-valued header (Vary, Link): after what is there, comma-separated. */
export function appendHeader(headers: ResponseHeaders, name: string, value: string): void {
  const before = headers[name];
  headers[name] = before === undefined ? value : `${before}, ${value}`;
}

/** Hands the gathered headers to a writer that sets its own afterwards (the docs, /metrics, /rpc). */
export function setHeaders(res: ServerResponse, headers: ResponseHeaders): void {
  for (const name in headers) res.setHeader(name, headers[name]!);
}

/** Adds a route's own headers to those gathered; a Link in both is one list, the route's links first (a page's rel="next", then a deprecation's). */
export function addHeaders(headers: ResponseHeaders, extra: Record<string, string>): void {
  for (const name in extra)
    headers[name] = name === "link" && headers.link !== undefined ? `${extra.link}, ${headers.link}` : extra[name]!;
}

/** An answer: its status and body, the headers gathered for it (added to), and its own `extra` ones (a route's). */
export interface Answer<Body> {
  status: number;
  body: Body;
  headers?: ResponseHeaders;
  extra?: Record<string, string> | undefined;
}

/** A JSON answer. */
export function sendJson(res: ServerResponse, { status, body, headers = {}, extra }: Answer<unknown>): void {
  if (res.headersSent || res.destroyed) return;
  if (extra) addHeaders(headers, extra);
  if (status === 204 || status === 304 || body === undefined) {
    res.writeHead(status, headers);
    res.end();
    return;
  }
  sendJsonText(res, status, JSON.stringify(body), headers);
}

/** A JSON answer whose body is already serialized (the edge cache's): no JSON work at all. */
export function sendSerialized(res: ServerResponse, { status, body, headers = {}, extra }: Answer<Buffer>): void {
  if (res.headersSent || res.destroyed) return;
  if (extra) addHeaders(headers, extra);
  if (status === 304) {
    res.writeHead(status, headers);
    res.end();
    return;
  }
  headers["content-type"] ??= "application/json; charset=utf-8";
  headers["content-length"] = String(body.length);
  res.writeHead(status, headers);
  res.end(body);
}

export function sendError(
  res: ServerResponse,
  err: HttpError,
  presentedToken: boolean,
  headers: ResponseHeaders = {},
): void {
  if (res.headersSent || res.destroyed) return;
  addHeaders(headers, err.headers);
  if (err.status === 401)
    headers["www-authenticate"] = presentedToken
      ? 'Bearer realm="switchyard", error="invalid_token"'
      : 'Bearer realm="switchyard"';
  sendJsonText(res, err.status, err.body, headers);
}

/** A JSON body already serialized. */
function sendJsonText(res: ServerResponse, status: number, payload: string, headers: ResponseHeaders): void {
  // A versioned media type the client asked for (gathered before) stays; otherwise plain JSON.
  headers["content-type"] ??= "application/json; charset=utf-8";
  headers["content-length"] = String(Buffer.byteLength(payload));
  res.writeHead(status, headers);
  res.end(payload);
}
