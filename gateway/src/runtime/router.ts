// Matches a request to an operation of the document: 404 for an unknown path, 405 with Allow
// for a known path and another method.
import type { CompiledOperation } from "./openapi.js";
import { edgeError } from "./errors.js";

export interface RouteMatch {
  operation: CompiledOperation;
  pathParams: Record<string, string>;
}

/** The first two segments of a path (`/v1/payments` of `/v1/payments/pay_1/refunds`): the key the router's index is built on. */
function leadingSegments(path: string): string {
  const end = path.indexOf("/", path.indexOf("/", 1) + 1);
  return end === -1 ? path : path.slice(0, end);
}

export class Router {
  /**
   * The operations a path may match, by its first two segments (version and collection), each list
   * in document order: a request tries only its own collection's few patterns instead of every
   * operation of every version. Operations whose first two segments hold a parameter are in every list.
   */
  private readonly byLeadingSegments = new Map<string, readonly CompiledOperation[]>();
  private readonly withParameterLead: readonly CompiledOperation[];

  constructor(operations: readonly CompiledOperation[]) {
    const literalLead = (o: CompiledOperation) => !leadingSegments(o.pathTemplate).includes("{");
    this.withParameterLead = operations.filter((o) => !literalLead(o));
    for (const key of new Set(operations.filter(literalLead).map((o) => leadingSegments(o.pathTemplate)))) {
      this.byLeadingSegments.set(
        key,
        operations.filter((o) => !literalLead(o) || leadingSegments(o.pathTemplate) === key),
      );
    }
  }

  match(method: string, pathname: string): RouteMatch {
    const allowed: string[] = [];
    for (const operation of this.byLeadingSegments.get(leadingSegments(pathname)) ?? this.withParameterLead) {
      const m = operation.pattern.exec(pathname);
      if (!m) continue;
      if (operation.method !== method && !(method === "HEAD" && operation.method === "GET")) {
        allowed.push(operation.method);
        continue;
      }
      const pathParams: Record<string, string> = {};
      for (let i = 0; i < operation.pathParams.length; i++) {
        const name = operation.pathParams[i]!;
        const raw = m[i + 1]!;
        try {
          pathParams[name] = raw.includes("%") ? decodeURIComponent(raw) : raw;
        } catch {
          throw edgeError("INVALID_REQUEST", `path parameter ${name} is not valid percent-encoding`);
        }
      }
      return { operation, pathParams };
    }
    if (allowed.length > 0) {
      const allow = [...new Set(allowed.includes("GET") ? [...allowed, "HEAD"] : allowed)].join(", ");
      throw edgeError("METHOD_NOT_ALLOWED", `${method} is not allowed here; allowed: ${allow}`, { allow });
    }
    throw edgeError("ROUTE_NOT_FOUND", `no route for ${pathname}`);
  }
}
