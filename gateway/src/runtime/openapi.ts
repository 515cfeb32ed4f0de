// Spec-first: the OpenAPI document is loaded once and compiled into operations the router
// matches and validators that check parameters and bodies exactly as the document says.
import { existsSync, readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import { closestMatch } from "leven";
import { PRIORITIES, type Priority } from "@switchyard/platform/priority.js";

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => void;

// Resolved through the workspace package, not relative to this file: the same from the sources and
// from the bundle in dist/. One document per major version.
export const openApiPath = (major: number): URL =>
  new URL(import.meta.resolve(`@switchyard/gateway/openapi/v${major}.yaml`));

/**
 * Where the gateway reads a version's document: the JSON the build wrote beside the bundle
 * (dist/openapi/v<N>.json) when there is one — parsing the YAML cost half a second of CPU and
 * left tens of MB of garbage in every start — else the YAML itself (run from the sources).
 */
export function servedApiPath(major: number): URL {
  const built = new URL(`./openapi/v${major}.json`, import.meta.url);
  return existsSync(built) ? built : openApiPath(major);
}
export const OPENAPI_PATH = openApiPath(1);

type Json = Record<string, unknown>;

interface ParameterObject {
  name: string;
  in: "path" | "query" | "header" | "cookie";
  required?: boolean;
  schema: Json;
}

export interface CompiledOperation {
  /** The major version of the document it comes from (its paths start /v<major>/). */
  readonly version: number;
  readonly operationId: string;
  readonly method: string;
  readonly pathTemplate: string;
  readonly pattern: RegExp;
  readonly pathParams: string[];
  readonly queryParams: string[];
  /** Parameters whose schema is an integer: their text must be a plain decimal integer. */
  readonly integerParams: string[];
  /** Header parameters, lower-cased. */
  readonly headerParams: { name: string; key: string }[];
  readonly validateParams: ValidateFunction;
  readonly validateBody: ValidateFunction | undefined;
  readonly bodyRequired: boolean;
  /** The body may also come as NDJSON (`application/x-ndjson`): read as the array of its lines, then checked as the JSON body. */
  readonly acceptsNdjson: boolean;
  /**
   * Set when the request body says `x-switchyard-per-line-items: true`: the body is an array whose
   * elements are checked one by one against its `items` schema — an element that fails is a per-line
   * problem the route reports, not a refusal of the request — while `validateBody` checks the rest.
   */
  readonly validateLine: ValidateFunction | undefined;
  readonly requiresAuth: boolean;
  /** The document offers a text/event-stream answer (a live stream) besides its JSON one. */
  readonly offersEventStream: boolean;
  /** What is shed first under overload (`x-switchyard-priority`; runtime/priority.ts narrows it per request). */
  readonly priority: Priority;
  /** What the version does with a query parameter the operation does not declare (the document says). */
  readonly unknownQueryParameters: UnknownQueryParameters;
  /** Why `validateBody` refused a body: an unknown field before any other problem (it may explain a missing one). */
  bodyProblem(body: unknown): ValidationProblem;
  /** The same for one element of a body checked line by line (`validateLine`). */
  lineProblem(value: unknown): ValidationProblem;
}

/**
 * The document's `x-switchyard-unknown-query-parameters`: `refused` — 400 naming the parameter — or
 * `ignored` — the answer names it in `X-Ignored-Query-Parameters` (a version that ignored them may
 * not start refusing them: that tightens its validation, a breaking change). Absent: ignored.
 */
export type UnknownQueryParameters = "refused" | "ignored";
const UNKNOWN_QUERY_PARAMETERS = "x-switchyard-unknown-query-parameters";

/** Every operation states its priority (`x-switchyard-priority`): none, or another word, is a broken document. */
function declaredPriority(op: Json): Priority {
  const said: unknown = op["x-switchyard-priority"];
  if (!PRIORITIES.includes(said as Priority))
    throw new Error(`${String(op.operationId)}: x-switchyard-priority must be one of ${PRIORITIES.join(", ")}`);
  return said as Priority;
}

export interface ApiDocument {
  readonly version: number;
  readonly document: Json;
  readonly json: string;
  readonly operations: CompiledOperation[];
}

const DEFS_ID = "urn:switchyard:openapi:v1";
const METHODS = ["get", "put", "post", "delete", "patch", "head", "options"] as const;

/** `#/components/schemas/X` → a ref into the schema registered with Ajv. */
function rewriteRefs(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(rewriteRefs);
  if (node && typeof node === "object") {
    const out: Json = {};
    for (const [k, v] of Object.entries(node)) {
      out[k] =
        k === "$ref" && typeof v === "string" && v.startsWith("#/components/schemas/")
          ? `${DEFS_ID}#/$defs/${v.slice("#/components/schemas/".length)}`
          : rewriteRefs(v);
    }
    return out;
  }
  return node;
}

function resolve<T>(doc: Json, node: unknown): T {
  const ref = (node as { $ref?: string } | undefined)?.$ref;
  if (!ref) return node as T;
  let target: unknown = doc;
  for (const part of ref.replace(/^#\//, "").split("/")) target = (target as Json)[part];
  if (target === undefined) throw new Error(`unresolved $ref ${ref}`);
  return resolve<T>(doc, target);
}

function compilePattern(template: string): { pattern: RegExp; names: string[] } {
  const names: string[] = [];
  const source = template
    .split("/")
    .map((segment) => {
      const m = /^\{(\w+)\}$/.exec(segment);
      if (!m) return segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      names.push(m[1]!);
      return "([^/]+)";
    })
    .join("/");
  return { pattern: new RegExp(`^${source}$`), names };
}

export function loadApiDocument(path: URL | string = OPENAPI_PATH): ApiDocument {
  const text = readFileSync(path, "utf8");
  const document = (String(path).endsWith(".json") ? JSON.parse(text) : parseYaml(text)) as Json;
  const version = Number(/^(\d+)\./.exec(String((document.info as Json | undefined)?.version))?.[1] ?? 1);
  const components = (document.components ?? {}) as Json;
  const unknownQueryParameters = (document[UNKNOWN_QUERY_PARAMETERS] ?? "ignored") as UnknownQueryParameters;
  if (unknownQueryParameters !== "refused" && unknownQueryParameters !== "ignored")
    throw new Error(
      `${UNKNOWN_QUERY_PARAMETERS} is "refused" or "ignored", not ${JSON.stringify(unknownQueryParameters)}`,
    );
  const ajvOptions = { strict: true, allErrors: false, allowUnionTypes: true, strictTuples: false };
  const bodyAjv = new Ajv2020(ajvOptions);
  const paramAjv = new Ajv2020({ ...ajvOptions, coerceTypes: true });
  // Only for a body already refused: every problem, each with the schema it breaks (the declared
  // names an unknown field is compared with). Valid bodies never pay for it.
  const diagnosisAjv = new Ajv2020({ ...ajvOptions, allErrors: true, verbose: true });
  for (const ajv of [bodyAjv, paramAjv, diagnosisAjv]) {
    addFormats(ajv);
    ajv.addSchema({ $id: DEFS_ID, $defs: rewriteRefs(components.schemas ?? {}) as Json });
  }
  const globalSecurity = (document.security ?? []) as unknown[];
  const operations: CompiledOperation[] = [];
  for (const [template, rawItem] of Object.entries((document.paths ?? {}) as Json)) {
    const item = rawItem as Json;
    const shared = ((item.parameters ?? []) as unknown[]).map((p) => resolve<ParameterObject>(document, p));
    const { pattern, names } = compilePattern(template);
    for (const method of METHODS) {
      const op = item[method] as Json | undefined;
      if (!op) continue;
      const own = ((op.parameters ?? []) as unknown[]).map((p) => resolve<ParameterObject>(document, p));
      const params = [...shared.filter((s) => !own.some((o) => o.name === s.name && o.in === s.in)), ...own];
      const keyOf = (p: ParameterObject) => (p.in === "header" ? p.name.toLowerCase() : p.name);
      const paramSchema = {
        type: "object",
        properties: Object.fromEntries(params.map((p) => [keyOf(p), rewriteRefs(p.schema)])),
        required: params.filter((p) => p.required || p.in === "path").map(keyOf),
      };
      const body = resolve<Json | undefined>(document, op.requestBody);
      const bodySchema = (body?.content as Json | undefined)?.["application/json"] as Json | undefined;
      const security = (op.security ?? globalSecurity) as unknown[];
      let wholeSchema = bodySchema?.schema as Json | undefined;
      let lineSchema: Json | undefined;
      if (body?.["x-switchyard-per-line-items"] === true && wholeSchema) {
        const { items, ...rest } = resolve<Json>(document, wholeSchema);
        if (!items || rest.type !== "array")
          throw new Error(`${String(op.operationId)}: x-switchyard-per-line-items needs an array body with items`);
        wholeSchema = rest;
        lineSchema = items as Json;
      }
      const validators: {
        params?: ValidateFunction;
        body?: ValidateFunction;
        line?: ValidateFunction;
        bodyDiagnosis?: ValidateFunction;
        lineDiagnosis?: ValidateFunction;
      } = {};
      operations.push({
        version,
        operationId: String(op.operationId),
        method: method.toUpperCase(),
        pathTemplate: template,
        pattern,
        pathParams: names,
        queryParams: params.filter((p) => p.in === "query").map((p) => p.name),
        integerParams: params.filter((p) => p.schema.type === "integer").map(keyOf),
        headerParams: params.filter((p) => p.in === "header").map((p) => ({ name: p.name, key: p.name.toLowerCase() })),
        // Validators are compiled when an operation is first asked for, not at start: most of a
        // document (a deprecated version's above all) is rarely used, and compiling all of it cost
        // the gateway about a second of CPU and tens of MB at every start.
        get validateParams() {
          return (validators.params ??= paramAjv.compile(paramSchema));
        },
        get validateBody() {
          return wholeSchema ? (validators.body ??= bodyAjv.compile(rewriteRefs(wholeSchema) as Json)) : undefined;
        },
        bodyRequired: Boolean(body?.required),
        acceptsNdjson: Boolean(bodySchema && (body?.content as Json)["application/x-ndjson"]),
        get validateLine() {
          return lineSchema ? (validators.line ??= bodyAjv.compile(rewriteRefs(lineSchema) as Json)) : undefined;
        },
        requiresAuth: security.length > 0,
        priority: declaredPriority(op),
        offersEventStream: Object.values((op.responses ?? {}) as Json).some((r) =>
          Boolean(((resolve<Json>(document, r).content ?? {}) as Json)["text/event-stream"]),
        ),
        unknownQueryParameters,
        bodyProblem(value) {
          validators.bodyDiagnosis ??= diagnosisAjv.compile(rewriteRefs(wholeSchema) as Json);
          return diagnose(validators.bodyDiagnosis, value, "body");
        },
        lineProblem(value) {
          validators.lineDiagnosis ??= diagnosisAjv.compile(rewriteRefs(lineSchema) as Json);
          return diagnose(validators.lineDiagnosis, value, "item");
        },
      });
    }
  }
  return { version, document, json: JSON.stringify(document), operations };
}

/**
 * Each operation's representation — its parameters, request body and responses with every $ref
 * resolved, prose left out and the /v<N> prefix made neutral — as a string to compare across
 * versions: where two versions' strings differ, the representation changed.
 */
export function representationsOf(api: ApiDocument): Map<string, string> {
  const doc = api.document;
  const seen = new Set<string>();
  const inline = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(inline);
    if (!value || typeof value !== "object")
      return typeof value === "string" ? value.replace(/\/v\d+(?=\/|$)/g, "/vN") : value;
    const ref = (value as Json).$ref;
    if (typeof ref === "string") {
      if (seen.has(ref)) return { $ref: ref }; // recursive: compared by name
      seen.add(ref);
      const target = inline(resolve<unknown>(doc, value));
      seen.delete(ref);
      return target;
    }
    return Object.fromEntries(
      Object.entries(value as Json)
        .filter(([k]) => !["description", "summary", "examples", "example"].includes(k))
        .map(([k, v]) => [k, inline(v)]),
    );
  };
  const out = new Map<string, string>();
  for (const item of Object.values((doc.paths ?? {}) as Json)) {
    for (const method of METHODS) {
      const op = (item as Json)[method] as Json | undefined;
      if (op)
        out.set(
          String(op.operationId),
          JSON.stringify(
            inline({
              parameters: [
                ...(((item as Json).parameters ?? []) as unknown[]),
                ...((op.parameters ?? []) as unknown[]),
              ],
              requestBody: op.requestBody,
              responses: op.responses,
            }),
          ),
        );
    }
  }
  return out;
}

// Keywords that say a value is of the wrong shape (400) rather than breaking a rule (422).
const VALUE_KEYWORDS = new Set([
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "minLength",
  "maxLength",
  "pattern",
  "format",
  "enum",
  "const",
  "multipleOf",
  "minItems",
  "maxItems",
  "uniqueItems",
]);

export interface ValidationProblem {
  /** 400 for a malformed request, 422 for well-typed values that break a rule. */
  status: 400 | 422;
  message: string;
}

function fieldName(error: ErrorObject, root: string): string {
  const path = error.instancePath.replace(/^\//, "").replaceAll("/", ".");
  if (error.keyword === "required")
    return [path, (error.params as { missingProperty: string }).missingProperty].filter(Boolean).join(".");
  if (error.keyword === "additionalProperties")
    return [path, (error.params as { additionalProperty: string }).additionalProperty].filter(Boolean).join(".");
  return path || root;
}

/**
 * The name among `declared` a misspelt one most likely meant (one edit away for a short name, two for
 * a longer one), as the end of a message: " (did you mean limit?)"; "" when none is that close.
 */
export function didYouMean(name: string, declared: readonly string[]): string {
  const meant = closestMatch(name, declared, { maxDistance: name.length <= 4 ? 1 : 2 });
  return meant === undefined || meant === name ? "" : ` (did you mean ${meant}?)`;
}

/** A refused value's problem as the client is told it, from a validator that reports every problem. */
function diagnose(validate: ValidateFunction, value: unknown, root: string): ValidationProblem {
  validate(value);
  const errors = validate.errors ?? [];
  const first = errors.find((e) => e.keyword === "additionalProperties") ?? errors[0];
  return first ? describeBodyError(first, root) : { status: 400, message: `${root} is invalid` };
}

/** `root` names the whole value checked (the body, or one line of it). */
export function describeBodyError(error: ErrorObject, root = "body"): ValidationProblem {
  const field = fieldName(error, root);
  switch (error.keyword) {
    case "required":
      return { status: 400, message: `${field} is required` };
    case "additionalProperties": {
      const declared = Object.keys((error.parentSchema?.properties ?? {}) as Json);
      const name = (error.params as { additionalProperty: string }).additionalProperty;
      return { status: 400, message: `unknown field ${field}${didYouMean(name, declared)}` };
    }
    case "type":
      return {
        status: 400,
        message: `${field} must be of type ${String((error.params as { type: string | string[] }).type)}`,
      };
    default:
      return {
        status: VALUE_KEYWORDS.has(error.keyword) ? 422 : 400,
        message: `${field} ${error.message ?? "is invalid"}`,
      };
  }
}

/** Parameters are part of the request's syntax: any problem with one is a 400. */
export function describeParamError(error: ErrorObject): string {
  const field = fieldName(error, "parameter");
  if (error.keyword === "required") return `${field} is required`;
  return `${field} ${error.message ?? "is invalid"}`;
}
