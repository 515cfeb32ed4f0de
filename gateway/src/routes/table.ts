// The route table: every operation of the OpenAPI documents bound to its handler and the upstream it calls.
import type { RouteGroup, RouteHandler } from "../runtime/route.js";
import type { CompiledOperation } from "../runtime/openapi.js";
import type { UpstreamName } from "../upstreams.js";
import { identityRoutes } from "./identity.js";
import { paymentRoutes } from "./payments.js";
import { orderRoutes } from "./orders.js";
import { contentRoutes } from "./content.js";
import { webhookRoutes } from "./webhooks.js";

const ROUTE_GROUPS: RouteGroup[] = [identityRoutes, paymentRoutes, orderRoutes, contentRoutes, webhookRoutes];

/** Operations the edge answers itself, without a handler. */
export const OPENAPI_DOCUMENT_OPERATION = "getOpenApiDocument";
const BUILT_IN = new Set([OPENAPI_DOCUMENT_OPERATION]);

export interface BoundRoute {
  handler: RouteHandler;
  upstream: UpstreamName;
}

/** Every operation of the documents (every published version's) has exactly one handler, and every handler an operation. */
export function bindRoutes(
  operations: CompiledOperation[],
  groups: RouteGroup[] = ROUTE_GROUPS,
): Map<string, BoundRoute> {
  const bound = new Map<string, BoundRoute>();
  for (const group of groups) {
    for (const [operationId, handler] of Object.entries(group.handlers)) {
      if (bound.has(operationId)) throw new Error(`two handlers for operation ${operationId}`);
      bound.set(operationId, { handler, upstream: group.upstream });
    }
  }
  const documented = new Set(operations.map((o) => o.operationId));
  const missing = [...documented].filter((id) => !bound.has(id) && !BUILT_IN.has(id));
  const undocumented = [...bound.keys()].filter((id) => !documented.has(id));
  if (missing.length > 0 || undocumented.length > 0) {
    const disagreement = `without handler [${missing.join(", ")}], without operation [${undocumented.join(", ")}]`;
    throw new Error(`routes and OpenAPI document disagree: ${disagreement}`);
  }
  return bound;
}
