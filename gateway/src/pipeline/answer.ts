// Stages: represent and respond (/v<N>) — the route's result written with the headers gathered on the way
// (runtime/respond.ts): a JSON body, one already serialized (the edge cache's), or a live event stream
// (runtime/sse.ts); and every refusal or failure as the error envelope, through one call (`answerError`).
import type { TokenVerifier } from "@switchyard/platform/auth.js";
import { toHttpError, type HttpError } from "../runtime/errors.js";
import type { FailureLog } from "../runtime/failure-log.js";
import { addHeaders, sendError, sendJson, sendSerialized } from "../runtime/respond.js";
import type { RouteResult } from "../runtime/route.js";
import { writeEventStream } from "../runtime/sse.js";
import type { ApiExchange } from "./api-exchange.js";

export interface Answers {
  /** Writes the route's result; a promise while a live stream lasts. */
  respond(x: ApiExchange, result: RouteResult): Promise<void> | undefined;
  /** The OpenAPI document the request's path names (the edge answers it itself). */
  respondDocument(x: ApiExchange, document: unknown): void;
  /** The error envelope of a refusal or failure already mapped to its status: the one place an API error is sent. */
  answerError(x: ApiExchange, error: HttpError): void;
  /** Whatever the pipeline threw, as the client sees it (runtime/errors.ts); a 5xx is logged (failure-log.ts). */
  fail(x: ApiExchange, err: unknown): void;
}

export function answerStage({
  verifier,
  heartbeatMs,
  failures,
}: {
  verifier: TokenVerifier;
  heartbeatMs: number;
  failures: FailureLog;
}): Answers {
  async function respondWithEvents(x: ApiExchange, result: RouteResult): Promise<void> {
    const { res, headers } = x;
    const cancel = x.cancellation!;
    const streamCaller = x.caller;
    x.record.eventStream = true;
    if (result.headers) addHeaders(headers, result.headers);
    try {
      await writeEventStream(res, result.events!, result.follow, {
        heartbeatMs,
        signal: cancel.signal,
        cancel: () => cancel.abort(),
        headers,
        watchCredential: streamCaller && ((end) => verifier.watch(streamCaller, end)),
        lastEventId: result.lastEventId,
      });
    } finally {
      // However the stream ended, what it held upstream goes (its calls, its place in a shared stream).
      cancel.abort();
    }
  }

  function answerError(x: ApiExchange, error: HttpError): void {
    sendError(x.res, error, x.presentedToken, x.headers);
  }

  return {
    respond(x, result) {
      if (result.events) return respondWithEvents(x, result);
      const { status, headers: extra } = result;
      if (result.serialized) sendSerialized(x.res, { status, body: result.serialized, headers: x.headers, extra });
      else sendJson(x.res, { status, body: result.body, headers: x.headers, extra });
      return undefined;
    },
    respondDocument(x, document) {
      sendJson(x.res, { status: 200, body: document, headers: x.headers });
    },
    answerError,
    fail(x, err) {
      const httpError = toHttpError(err, x.upstream);
      if (httpError.status >= 500) {
        const { req, record } = x;
        failures.report(httpError.code, () => ({
          status: httpError.status,
          request_id: record.requestId,
          method: req.method,
          path: req.url?.split("?")[0],
          cause: err instanceof Error ? { type: err.name, message: err.message } : { message: String(err) },
        }));
      }
      answerError(x, httpError);
    },
  };
}
