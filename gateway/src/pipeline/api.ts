// The API pipeline (/v<N>/…), composed once at start: the edge's lifecycle (edge-policy.ts,
// edge-lifecycle.ts) and /v1's own stages, in order —
//   identify → route and version → enter (admit → quota → (shed) → stream slot) → parameters and
//   body → deadline → caller required? → cancellation and call → represent and respond → finish
// — each a function of its own module called with the request's ApiExchange: nothing is made per
// stage or per request beyond that object and the route's call options.
import { wantsEventStream } from "../runtime/streams.js";
import { asksForLaterPage } from "../runtime/priority.js";
import { OPENAPI_DOCUMENT_OPERATION } from "../routes/table.js";
import { ApiExchange, type ApiRequest } from "./api-exchange.js";
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

/** Serves one request of the API. */
export type ServeApi = (request: ApiRequest) => Promise<void>;

export function apiPipeline({
  policy,
  routeAndVersion,
  readBody,
  callRoute,
  answers,
  documents,
}: ApiPipelineStages): ServeApi {
  /** An answer the edge gives itself draws on the quota; past it, 429 before any other answer (the body left to flow away). */
  async function charge(x: ApiExchange): Promise<void> {
    const refusal = await policy.charge(x);
    if (refusal === undefined) return;
    x.req.resume();
    throw refusal;
  }

  /** When the response closes, answered or not. */
  function closed(x: ApiExchange): void {
    // A client that goes away cancels the gRPC call and everything below it.
    x.gone = !x.res.writableFinished;
    if (x.gone) x.cancellation?.abort();
    // Upstream work: the route was called (not refused at the edge) and not answered from the edge cache's memory.
    policy.finish(x, {
      upstreamWork: x.cancellation !== undefined && x.record.cache !== "hit",
      status: x.res.statusCode,
    });
  }

  return async function serveApi(request) {
    const x = new ApiExchange(request);
    const { req } = request;
    request.record.onClose = () => closed(x);
    try {
      const verifying = policy.identify(x, req.headers.authorization);
      if (verifying) await verifying;

      const refusedRoute = routeAndVersion(x);
      if (refusedRoute !== undefined) {
        // A refused route or version is an API answer too: it draws on the quota (and 429 comes first).
        await charge(x);
        throw refusedRoute;
      }
      if (x.operation.operationId === OPENAPI_DOCUMENT_OPERATION) {
        await charge(x);
        readParams(x);
        return answers.respondDocument(x, documents.get(x.pathMajor));
      }

      x.liveStream = wantsEventStream(x.operation, req.headers.accept);
      x.priority = policy.priority(x.operation, { pagesOn: asksForLaterPage(x.search), eventStream: x.liveStream });
      const refused = await policy.enter(x);
      if (refused !== undefined) {
        req.resume();
        return answers.answerError(x, refused);
      }

      readParams(x);
      if (takesBody(x)) await readBody(x);

      const deadlineMs = policy.deadline(askedTimeoutMs(req.headers["x-request-timeout-ms"]));
      const refusedCaller = requireCaller(x, x.operation.requiresAuth);
      if (refusedCaller !== undefined) throw refusedCaller;
      x.deadlineAt = Date.now() + deadlineMs;

      const result = await callRoute(x);
      if (result.events) policy.opened(x);
      const streaming = answers.respond(x, result);
      if (streaming) await streaming;
    } catch (err) {
      answers.fail(x, err);
    }
  };
}
