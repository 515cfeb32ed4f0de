// Stage: parameters and body (/v<N>) — the request's input, checked against the operation of the
// OpenAPI document: path, query and header parameters (400; a query parameter the operation does not
// declare refused or named as ignored, as the version's document says), then the body when the
// operation takes one (runtime/body.ts: 413, 415, 400; the document's schema: 400 for shape, 422 for
// values), an element at a time where the operation takes its body line by line.
import { readRequestBody } from "../runtime/body.js";
import { edgeError } from "../runtime/errors.js";
import { describeParamError, didYouMean, type CompiledOperation } from "../runtime/openapi.js";
import type { BodyLine } from "../runtime/route.js";
import type { ApiExchange } from "./api-exchange.js";

/** Integers are plain decimals: no 0x, exponents, signs, spaces or Infinity slipping through coercion. */
const DECIMAL_INTEGER = /^-?(0|[1-9][0-9]{0,15})$/;

/** Where a v1 answer names the query parameters it ignored (each percent-encoded, comma-separated). */
export const IGNORED_QUERY_PARAMETERS = "x-ignored-query-parameters";

/** The query's names the operation does not declare, each once, in the order given. */
function undeclared(query: URLSearchParams, operation: CompiledOperation): string[] {
  const names = new Set<string>();
  for (const name of query.keys()) if (!operation.queryParams.includes(name)) names.add(name);
  return [...names];
}

/** What the route takes instead, as the end of a refusal's message. */
function instead(name: string, declared: readonly string[]): string {
  const meant = didYouMean(name, declared);
  if (meant) return meant;
  return declared.length === 0 ? ": this route takes no query parameters" : `: this route takes ${declared.join(", ")}`;
}

/** The path, query and header parameters, typed and checked (x.params). */
export function readParams(x: ApiExchange): void {
  const { operation, req } = x;
  const params: Record<string, unknown> = { ...x.pathParams };
  if (x.search) {
    const query = new URLSearchParams(x.search);
    const unknown = undeclared(query, operation);
    if (unknown.length > 0) {
      if (operation.unknownQueryParameters === "refused")
        throw edgeError(
          "INVALID_REQUEST",
          `unknown query parameter ${unknown[0]!}${instead(unknown[0]!, operation.queryParams)}`,
        );
      x.headers[IGNORED_QUERY_PARAMETERS] = unknown.map(encodeURIComponent).join(", ");
    }
    for (const name of operation.queryParams) {
      const values = query.getAll(name);
      if (values.length > 1) throw edgeError("INVALID_REQUEST", `query parameter ${name} is given more than once`);
      if (values.length === 1) params[name] = values[0];
    }
  }
  for (const { key } of operation.headerParams) {
    const value = req.headers[key];
    if (typeof value === "string") params[key] = value;
  }
  for (const name of operation.integerParams) {
    const raw = params[name];
    if (typeof raw !== "string") continue;
    if (!DECIMAL_INTEGER.test(raw))
      throw edgeError("INVALID_REQUEST", `${name} must be a whole number written in decimal digits`);
    params[name] = Number(raw);
  }
  if (!operation.validateParams(params))
    throw edgeError("INVALID_REQUEST", describeParamError(operation.validateParams.errors![0]!));
  x.params = params;
}

/** Whether the body is read: the operation takes one, and it is required or one was sent. */
export function takesBody(x: ApiExchange): boolean {
  const { operation, req } = x;
  if (!operation.validateBody) return false;
  const sentBody = Number(req.headers["content-length"] ?? 0) > 0 || req.headers["transfer-encoding"] !== undefined;
  return operation.bodyRequired || sentBody;
}

/** Reads the body and checks it (x.body, and x.lines for an operation that takes it line by line). */
export type ReadBody = (x: ApiExchange) => Promise<void>;

export function bodyStage(maxBodyBytes: number): ReadBody {
  return async function readBody(x) {
    const { operation } = x;
    const read = await readRequestBody(x.req, maxBodyBytes, operation.acceptsNdjson);
    // An NDJSON body is the array of its lines (a line that is no JSON holds its place as null).
    const body = read.media === "json" ? read.value : read.lines.map((l) => (l.unparsable ? null : l.value));
    if (!operation.validateBody!(body)) {
      const problem = operation.bodyProblem(body);
      throw edgeError(problem.status === 422 ? "RULE_VIOLATION" : "INVALID_REQUEST", problem.message);
    }
    x.body = body;
    const validateLine = operation.validateLine;
    if (!validateLine) return;
    // Each element on its own: one that is not what the document says is that line's problem.
    const numbered =
      read.media === "json"
        ? (body as unknown[]).map((value, i) => ({ line: i + 1, value, unparsable: false }))
        : read.lines;
    x.lines = numbered.map(({ line, value, unparsable }): BodyLine => {
      if (unparsable) return { line, problem: { status: 400, message: "the line is not a JSON value" } };
      return validateLine(value) ? { line, value } : { line, problem: operation.lineProblem(value) };
    });
  };
}
