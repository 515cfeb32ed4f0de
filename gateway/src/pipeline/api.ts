// The API pipeline (/v<N>/…), composed once at start: the edge's shared stages (edge-policy.ts) and
// /v1's own, in order —
//   identify → route and version → admit → quota → (shed) → stream slot → parameters and body →
//   deadline → caller required? → cancellation and call → represent and respond
// — each a function of its own module called with the request's ApiExchange: nothing is made per
// stage or per request beyond that object and the route's call options.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { RateDecision } from "../runtime/rate-limit.js";
import type { RequestRecord } from "../runtime/observability.js";
import type { ResponseHeaders } from "../runtime/respond.js";
import { wantsEventStream } from "../runtime/streams.js";
import { OPENAPI_DOCUMENT_OPERATION } from "../routes/table.js";
import { ApiExchange } from "./api-exchange.js";
import type { Answers } from "./answer.js";
import type { CallRoute } from "./call.js";
import { askedTimeoutMs } from "./deadline.js";
import type { EdgePolicy } from "./edge-policy.js";
import { requireCaller } from "./identify.js";
import { readParams, takesBody, type ReadBody } from "./input.js";
import type { RouteAndVersion } from "./route.js";

export interface ApiPipelineStages {
  policy: EdgePolicy;
  routeAndVersion: RouteAndVersion;
  readBody: ReadBody;
  callRoute: CallRoute;
  answers: Answers;
  /** The document of each published version, by major (answered at /v<N>/openapi.json). */
  documents: ReadonlyMap<number, unknown>;
}

/** Serves one request of the API; `headers`: what its answer carries so far (its request id). */
export type ServeApi = (
  req: IncomingMessage,
  res: ServerResponse,
  record: RequestRecord,
  headers: ResponseHeaders,
  address: string,
  pathname: string,
  search: string,
) => Promise<void>;

export function apiPipeline({
  policy,
  routeAndVersion,
  readBody,
  callRoute,
  answers,
  documents,
}: ApiPipelineStages): ServeApi {
  const { identify, admission, quota, takeStreamSlot, deadline } = policy;

  /** The quota's headers on the answer; past it, 429 before any other answer (the body left to flow away). */
  function charge(x: ApiExchange, decision: RateDecision): void {
    const refusal = quota.settle(x, decision);
    if (refusal === undefined) return;
    x.req.resume();
    throw refusal;
  }

  /** When the response closes, answered or not. */
  function closed(x: ApiExchange): void {
    // A client that goes away cancels the gRPC call and everything below it.
    x.gone = !x.res.writableFinished;
    if (x.gone) x.cancellation?.abort();
    // Only answers that did the upstream work teach the concurrency limit their latency (an answer
    // from the edge cache's memory would teach it a latency no upstream call has).
    x.giveBackPlace(x.cancellation !== undefined && x.record.cache !== "hit" && x.res.statusCode < 500);
  }

  return async function serveApi(req, res, record, headers, address, pathname, search) {
    const x = new ApiExchange(req, res, record, headers, address, pathname, search, req.method ?? "GET");
    record.onClose = () => closed(x);
    try {
      const verifying = identify(x, req.headers.authorization);
      if (verifying) await verifying;

      const refusedRoute = routeAndVersion(x);
      if (refusedRoute !== undefined) {
        // A refused route or version is an API answer too: it draws on the quota (and 429 comes first).
        charge(x, await quota.ask(x, true));
        throw refusedRoute;
      }
      if (x.operation.operationId === OPENAPI_DOCUMENT_OPERATION) {
        charge(x, await quota.ask(x, true));
        readParams(x);
        return answers.respondDocument(x, documents.get(x.pathMajor));
      }

      charge(x, await admission.admit(x));
      if (x.release === undefined) {
        req.resume();
        return answers.answerError(x, admission.shed());
      }
      x.eventStream = wantsEventStream(x.operation, req.headers.accept);
      if (x.eventStream) {
        const refusal = takeStreamSlot(x);
        if (refusal) throw refusal;
        res.once("close", x.slot!);
      }

      readParams(x);
      if (takesBody(x)) await readBody(x);

      const deadlineMs = deadline(askedTimeoutMs(req.headers["x-request-timeout-ms"]));
      const refusedCaller = requireCaller(x, x.operation.requiresAuth);
      if (refusedCaller !== undefined) throw refusedCaller;
      x.deadlineAt = Date.now() + deadlineMs;

      const result = await callRoute(x);
      const streaming = answers.respond(x, result);
      if (streaming) await streaming;
    } catch (err) {
      answers.fail(x, err);
    }
  };
}
