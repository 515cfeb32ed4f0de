// Matches a request to an operation of the document: 404 for an unknown path, 405 with Allow
// for a known path and another method.
import type { CompiledOperation } from "./openapi.js";
import { edgeError } from "./errors.js";

export interface RouteMatch {
  operation: CompiledOperation;
  pathParams: Record<string, string>;
}

export class Router {
  constructor(private readonly operations: readonly CompiledOperation[]) {}

  match(method: string, pathname: string): RouteMatch {
    const allowed: string[] = [];
    for (const operation of this.operations) {
      const m = operation.pattern.exec(pathname);
      if (!m) continue;
      if (operation.method !== method && !(method === "HEAD" && operation.method === "GET")) {
        allowed.push(operation.method);
        continue;
      }
      const pathParams: Record<string, string> = {};
      operation.pathParams.forEach((name, i) => {
        try {
          pathParams[name] = decodeURIComponent(m[i + 1]!);
        } catch {
          throw edgeError("INVALID_REQUEST", `path parameter ${name} is not valid percent-encoding`);
        }
      });
      return { operation, pathParams };
    }
    if (allowed.length > 0) {
      const allow = [...new Set(allowed.includes("GET") ? [...allowed, "HEAD"] : allowed)].join(", ");
      throw edgeError("METHOD_NOT_ALLOWED", `${method} is not allowed here; allowed: ${allow}`, { allow });
    }
    throw edgeError("ROUTE_NOT_FOUND", `no route for ${pathname}`);
  }
}
