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
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    // A versioned media type the client asked for (set by the caller) stays; otherwise plain JSON.
    "content-type": (res.getHeader("content-type") as string | undefined) ?? "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(payload),
  });
  res.end(payload);
}

export function sendError(res: ServerResponse, err: HttpError, presentedToken: boolean): void {
  const headers: Record<string, string> = { ...err.headers };
  if (err.status === 401) headers["www-authenticate"] = presentedToken ? 'Bearer realm="switchyard", error="invalid_token"' : 'Bearer realm="switchyard"';
  sendJson(res, err.status, err.details ? { error: err.message, code: err.code, details: err.details } : { error: err.message, code: err.code }, headers);
}
