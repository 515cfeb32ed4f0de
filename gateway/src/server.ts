// The edge's HTTP server: every request observed once (runtime/observability.ts: request id, span,
// access log, metrics) and handed to the pipeline; what Node answers itself (a missing Host, an
// Expect, CONNECT, requests it cannot parse) answered with the JSON error body too, as raw status
// lines where there is no response object; and draining: in-flight requests finish, up to a bound.
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "@switchyard/platform/logger.js";
import { warnIfCallTablesMissing } from "@switchyard/platform/grpc";
import { REQUEST_ID_HEADER } from "@switchyard/platform/request-id.js";
import { closeConnectionsLingering } from "./runtime/lingering-close.js";
import { edgeError } from "./runtime/errors.js";
import { observeRequest, type RequestRecord } from "./runtime/observability.js";
import { sendJson, type ResponseHeaders } from "./runtime/respond.js";
import type { Router } from "./runtime/router.js";
import type { Dispatch } from "./dispatch.js";

export interface EdgeServerOptions {
  host: string;
  port: number;
  /** An inherited, already listening socket to serve on instead of binding host and port. */
  listenFd: number | undefined;
  trustedProxyHops: number;
  logger: Logger;
  /** The first step of the pipeline: it answers every request Node hands over. */
  dispatch: Dispatch;
  /** The API's router: CONNECT is answered as it would answer the path (405 with Allow, or 404). */
  router: Router;
}

export interface EdgeServer {
  readonly port: number;
  readonly server: Server;
  /** Stops accepting, lets in-flight requests finish for up to `drainMs`, then cuts the rest; settles once closed. */
  close(drainMs: number): Promise<void>;
}

export async function listenEdge({
  host,
  port,
  listenFd,
  trustedProxyHops,
  logger,
  dispatch,
  router,
}: EdgeServerOptions): Promise<EdgeServer> {
  const observing = { trustedProxyHops, logger, accessLog: logger.isLevelEnabled("info") };

  function unhandled(err: unknown, res: ServerResponse, record: RequestRecord, headers: ResponseHeaders): void {
    logger.error({ err, request_id: record.requestId }, "unhandled error in request pipeline");
    if (!res.headersSent) sendJson(res, { status: 500, body: { error: "internal error", code: "INTERNAL" }, headers });
  }

  const serverOptions = {
    requestTimeout: 30_000,
    headersTimeout: 10_000,
    keepAliveTimeout: 5_000,
    requireHostHeader: false,
  };
  const server = createServer(serverOptions, (req, res) => {
    if (!req.headers.host && req.httpVersion === "1.1") {
      req.resume();
      return sendJson(res, {
        status: 400,
        body: { error: "an HTTP/1.1 request needs a Host header", code: "INVALID_REQUEST" },
      });
    }
    const record = observeRequest(req, res, observing);
    // Every answer carries its request id; what else it carries is gathered on the way (runtime/respond.ts).
    const headers: ResponseHeaders = { [REQUEST_ID_HEADER]: record.requestId };
    try {
      record.run(dispatch, req, res, record, headers)?.catch((err: unknown) => unhandled(err, res, record, headers));
    } catch (err) {
      unhandled(err, res, record, headers);
    }
  });
  // An answer sent before the body was read must still reach the client (runtime/lingering-close.ts).
  closeConnectionsLingering(server);
  // Node answers some requests itself; they get the JSON error body too.
  server.on("checkExpectation", (req, res) => {
    req.resume();
    sendJson(res, {
      status: 417,
      body: { error: `unsupported Expect: ${String(req.headers.expect).slice(0, 100)}`, code: "INVALID_REQUEST" },
    });
  });
  server.on("connect", (req, socket) => {
    // No route takes CONNECT: answer as the router does (405 with Allow, or 404).
    const target = req.url ?? "";
    let refusal = edgeError("INVALID_REQUEST", "CONNECT is not supported: this is not a proxy");
    if (target.startsWith("/")) {
      try {
        const q = target.indexOf("?");
        router.match("CONNECT", q === -1 ? target : target.slice(0, q));
      } catch (err) {
        if (err instanceof Error && "status" in err) refusal = err as typeof refusal;
      }
    }
    const body = JSON.stringify({ error: refusal.message, code: refusal.code });
    const extra = Object.entries(refusal.headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join("");
    const reason = refusal.status === 404 ? "Not Found" : refusal.status === 405 ? "Method Not Allowed" : "Bad Request";
    socket.end(rawAnswer(refusal.status, reason, extra, body));
  });
  // Requests node cannot even parse still get a JSON error, not a bare socket reset.
  server.on("clientError", (err: NodeJS.ErrnoException, socket) => {
    if (!socket.writable) return socket.destroy();
    // Bytes after a request that was fully read and is still being answered: let that answer
    // finish, then close. (A body broken half-way gets the 400 below.)
    const inFlight = (socket as unknown as { _httpMessage?: ServerResponse })._httpMessage;
    if (inFlight && !inFlight.writableFinished && !inFlight.headersSent && inFlight.req?.complete) {
      inFlight.once("finish", () => socket.destroy());
      return;
    }
    const status = err.code === "HPE_HEADER_OVERFLOW" ? 431 : err.code === "ERR_HTTP_REQUEST_TIMEOUT" ? 408 : 400;
    const message = status === 431 ? "request headers are too large" : "malformed HTTP request";
    const body = JSON.stringify({ error: message, code: "INVALID_REQUEST" });
    const reason =
      status === 431 ? "Request Header Fields Too Large" : status === 408 ? "Request Timeout" : "Bad Request";
    socket.end(rawAnswer(status, reason, "", body));
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    if (listenFd !== undefined) server.listen({ fd: listenFd }, () => resolve());
    else server.listen(port, host, () => resolve());
  });
  const boundPort = (server.address() as AddressInfo).port;
  warnIfCallTablesMissing(logger);
  logger.info({ port: boundPort }, "gateway listening");

  return {
    port: boundPort,
    server,
    close: (drainMs) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(() => server.closeAllConnections(), drainMs);
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
}

/** A whole answer for a socket without a response object: status line, headers, JSON body; then it closes. */
function rawAnswer(status: number, reason: string, extraHeaders: string, body: string): string {
  return (
    `HTTP/1.1 ${status} ${reason}\r\n${extraHeaders}content-type: application/json; charset=utf-8\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
  );
}
