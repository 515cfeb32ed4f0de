// Stage: route and version (/v<N>) — the operation of the OpenAPI documents that answers (404 for an
// unknown path, 405 with Allow for another method), the version: the path's, or another one asked for
// by media type on the same path (406 if unknown), and a deprecated route's headers and usage count.
import { HttpError } from "../runtime/errors.js";
import { appendHeader } from "../runtime/respond.js";
import type { Router } from "../runtime/router.js";
import {
  deprecationHeaders,
  negotiateVersion,
  type DeprecatedRouteUsage,
  type deprecatedOperations,
} from "../runtime/versions.js";
import type { BoundRoute } from "../routes/table.js";
import type { ApiExchange } from "./api-exchange.js";

export interface RouteStageOptions {
  router: Router;
  routes: ReadonlyMap<string, BoundRoute>;
  publishedMajors: readonly number[];
  deprecations: ReturnType<typeof deprecatedOperations>;
  deprecatedUsage: DeprecatedRouteUsage;
}

/** Finds the request's operation and version; returns the refusal when there is none (undefined: routed). */
export type RouteAndVersion = (x: ApiExchange) => HttpError | undefined;

export function routeStage({
  router,
  routes,
  publishedMajors,
  deprecations,
  deprecatedUsage,
}: RouteStageOptions): RouteAndVersion {
  return function routeAndVersion(x) {
    const { req, headers, method, pathname } = x;
    try {
      const match = router.match(method, pathname);
      let operation = match.operation;
      x.pathParams = match.pathParams;
      x.record.route = operation.pathTemplate;
      x.pathMajor = operation.version;
      const negotiated = negotiateVersion(
        x.pathMajor,
        req.headers.accept,
        req.headers["content-type"],
        publishedMajors,
      );
      appendHeader(headers, "vary", "Accept");
      if (negotiated.mediaType) headers["content-type"] = `${negotiated.mediaType}; charset=utf-8`;
      if (negotiated.major !== x.pathMajor) {
        operation = router.match(method, pathname.replace(/^\/v\d+/, `/v${negotiated.major}`)).operation;
      }
      x.operation = operation;
      x.version = negotiated.major;
    } catch (err) {
      // The router and the negotiation refuse with HttpError; anything else is a bug, not a refusal.
      if (err instanceof HttpError) return err;
      throw err;
    }
    const deprecated = deprecations.get(x.version);
    if (deprecated?.operations.has(x.operation.operationId)) {
      Object.assign(
        headers,
        deprecationHeaders(deprecated.version, pathname.replace(/^\/v\d+/, `/v${deprecated.successor}`)),
      );
      const tenant = x.caller?.tenantId ?? (typeof x.pathParams.tenant_id === "string" ? x.pathParams.tenant_id : "-");
      deprecatedUsage.count(tenant, `${method} ${x.operation.pathTemplate}`, x.caller !== undefined);
    }
    x.route = routes.get(x.operation.operationId);
    if (x.route) x.upstream = x.route.upstream;
    return undefined;
  };
}
