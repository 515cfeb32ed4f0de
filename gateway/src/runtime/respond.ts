// Writing responses: JSON bodies, and the error envelope with the headers its status needs.
import type { ServerResponse } from "node:http";
import type { HttpError } from "./errors.js";

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  if (status === 204 || status === 304 || body === undefined) {
    res.writeHead(status, headers);
    res.end();
    return;
  }
  sendJsonText(res, status, JSON.stringify(body), headers);
}

export function sendError(res: ServerResponse, err: HttpError, presentedToken: boolean): void {
  if (res.headersSent || res.destroyed) return;
  if (err.status === 401) res.setHeader("www-authenticate", presentedToken ? 'Bearer realm="switchyard", error="invalid_token"' : 'Bearer realm="switchyard"');
  sendJsonText(res, err.status, err.body, err.headers);
}

/** A JSON body already serialized. */
function sendJsonText(res: ServerResponse, status: number, payload: string, headers: Record<string, string>): void {
  for (const name in headers) res.setHeader(name, headers[name]!);
  // A versioned media type the client asked for (set by the caller) stays; otherwise plain JSON.
  if (!res.hasHeader("content-type")) res.setHeader("content-type", "application/json; charset=utf-8");
  res.setHeader("content-length", Buffer.byteLength(payload));
  res.writeHead(status);
  res.end(payload);
}
