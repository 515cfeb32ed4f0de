// The OpenAPI document as the fuzzer sees it: every operation with its parameters, request body
// schema (every $ref resolved) and security, and an independent reading of what the document says
// about a value — is it of the wrong shape (400), well-typed but breaking a rule (422), or fine? The
// gateway validates with Ajv; this file deliberately does not, so that it is a second opinion.
import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";

export const OPENAPI_URL = new URL("../../gateway/openapi/v1.yaml", import.meta.url);

export interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  enum?: unknown[];
  minItems?: number;
  maxItems?: number;
  format?: string;
}

export interface ParamModel {
  name: string;
  /** Header parameters by their lower-case name (as node presents them). */
  key: string;
  in: "path" | "query" | "header";
  required: boolean;
  schema: Schema;
}

export interface OperationModel {
  operationId: string;
  method: string;
  template: string;
  /** The template split on "/": literal segments, or `{name}`. */
  segments: string[];
  pathParams: ParamModel[];
  queryParams: ParamModel[];
  headerParams: ParamModel[];
  /**
   * `schema`: the application/json schema. `perLineItems` (x-switchyard-per-line-items): the body is
   * an array whose elements are checked one by one — an element that fails `schema.items` is a problem
   * of its line, not of the request. `ndjson`: the body may also come as application/x-ndjson.
   */
  body: { schema: Schema; required: boolean; perLineItems: boolean; ndjson: boolean } | undefined;
  requiresAuth: boolean;
  /** Anything but GET: it may change stored data. */
  mutating: boolean;
  /**
   * Who may do what (`x-switchyard-access`): public, tenant, tenant-own-items, owner, owner-admin,
   * admin, self-or-admin, session-owner or catalog-owner — see the document's Conventions.
   */
  access: string | undefined;
}

export interface ApiModel {
  document: Record<string, unknown>;
  operations: OperationModel[];
  /** The stable machine codes every error body must use. */
  errorCodes: Set<string>;
  /** "request bodies are limited to 64 KiB". */
  maxBodyBytes: number;
}

type Json = Record<string, unknown>;
const METHODS = ["get", "put", "post", "delete", "patch", "head", "options", "trace"] as const;

function lookup(doc: Json, ref: string): unknown {
  if (!ref.startsWith("#/")) throw new Error(`only local $refs are supported: ${ref}`);
  let node: unknown = doc;
  for (const part of ref.slice(2).split("/"))
    node = (node as Json | undefined)?.[part.replaceAll("~1", "/").replaceAll("~0", "~")];
  if (node === undefined) throw new Error(`unresolved $ref ${ref}`);
  return node;
}

/** The node with every $ref replaced by what it names (sibling keywords kept). */
export function deref(doc: Json, node: unknown, depth = 0): unknown {
  if (depth > 64) throw new Error("$ref nesting too deep (a cycle?)");
  if (Array.isArray(node)) return node.map((n) => deref(doc, n, depth + 1));
  if (node && typeof node === "object") {
    const { $ref, ...rest } = node as Json;
    const own = Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, deref(doc, v, depth + 1)]));
    return typeof $ref === "string" ? { ...(deref(doc, lookup(doc, $ref), depth + 1) as Json), ...own } : own;
  }
  return node;
}

export function loadApiModel(url: URL = OPENAPI_URL): ApiModel {
  const document = parseYaml(readFileSync(url, "utf8")) as Json;
  const description = String((document.info as Json | undefined)?.description ?? "");
  const limit = /request bodies are limited to (\d+) KiB/.exec(description);
  if (!limit) throw new Error("the document no longer states the body size limit");
  const globalSecurity = (document.security ?? []) as unknown[];
  const operations: OperationModel[] = [];
  for (const [template, rawItem] of Object.entries((document.paths ?? {}) as Json)) {
    const item = deref(document, rawItem) as Json;
    const shared = (item.parameters ?? []) as Json[];
    for (const method of METHODS) {
      const op = item[method] as Json | undefined;
      if (!op) continue;
      const own = (op.parameters ?? []) as Json[];
      const all = [...shared.filter((s) => !own.some((o) => o.name === s.name && o.in === s.in)), ...own];
      const params: ParamModel[] = all.map((p) => ({
        name: String(p.name),
        key: p.in === "header" ? String(p.name).toLowerCase() : String(p.name),
        in: p.in as ParamModel["in"],
        required: Boolean(p.required) || p.in === "path",
        schema: p.schema ?? {},
      }));
      const requestBody = op.requestBody as Json | undefined;
      const jsonBody = (requestBody?.content as Json | undefined)?.["application/json"] as Json | undefined;
      operations.push({
        operationId: String(op.operationId),
        method: method.toUpperCase(),
        template,
        segments: template.split("/"),
        pathParams: params.filter((p) => p.in === "path"),
        queryParams: params.filter((p) => p.in === "query"),
        headerParams: params.filter((p) => p.in === "header"),
        body: jsonBody
          ? {
              schema: jsonBody.schema as Schema,
              required: Boolean(requestBody?.required),
              perLineItems: requestBody?.["x-switchyard-per-line-items"] === true,
              ndjson: Boolean((requestBody?.content as Json)["application/x-ndjson"]),
            }
          : undefined,
        requiresAuth: ((op.security ?? globalSecurity) as unknown[]).length > 0,
        mutating: method !== "get",
        access: typeof op["x-switchyard-access"] === "string" ? op["x-switchyard-access"] : undefined,
      });
    }
  }
  const errorCode = deref(document, ((document.components as Json).schemas as Json).ErrorCode) as Schema;
  return {
    document,
    operations,
    errorCodes: new Set((errorCode.enum ?? []).map(String)),
    maxBodyBytes: Number(limit[1]) * 1024,
  };
}

// ---------------------------------------------------------------------------------------------
// What the document says about a JSON value.

/** 400: wrong shape (type, required, unknown field); 422: well-typed value that breaks a rule. */
export type ProblemClass = 400 | 422;

function hasType(value: unknown, type: string): boolean {
  switch (type) {
    case "null":
      return value === null;
    case "boolean":
      return typeof value === "boolean";
    case "string":
      return typeof value === "string";
    case "integer":
      return typeof value === "number" && Number.isInteger(value);
    case "number":
      return typeof value === "number" && Number.isFinite(value);
    case "array":
      return Array.isArray(value);
    case "object":
      return typeof value === "object" && value !== null && !Array.isArray(value);
    default:
      throw new Error(`unknown JSON Schema type ${type}`);
  }
}

/** Length as JSON Schema counts it: code points (a lone surrogate counts as one). */
export function codePoints(s: string): number {
  return [...s].length;
}

/**
 * Every kind of problem the value has against the schema (empty: the value is valid). A validator
 * that stops at its first error reports one of them, so the answer's class is one of these.
 */
export function problemsOf(schema: Schema, value: unknown, found: Set<ProblemClass> = new Set()): Set<ProblemClass> {
  const types = schema.type === undefined ? undefined : Array.isArray(schema.type) ? schema.type : [schema.type];
  if (types && !types.some((t) => hasType(value, t))) {
    found.add(400);
    return found;
  }
  if (schema.enum && !schema.enum.some((e) => e === value)) found.add(422);
  if (typeof value === "string") {
    const length = codePoints(value);
    if (schema.minLength !== undefined && length < schema.minLength) found.add(422);
    if (schema.maxLength !== undefined && length > schema.maxLength) found.add(422);
    if (schema.pattern !== undefined && !new RegExp(schema.pattern, "u").test(value)) found.add(422);
  }
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) found.add(422);
    if (schema.maximum !== undefined && value > schema.maximum) found.add(422);
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) found.add(422);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) found.add(422);
    if (schema.items) for (const item of value) problemsOf(schema.items, item, found);
  }
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const obj = value as Json;
    const has = (k: string) => Object.prototype.hasOwnProperty.call(obj, k) && obj[k] !== undefined;
    for (const name of schema.required ?? []) if (!has(name)) found.add(400);
    const properties = schema.properties ?? {};
    for (const key of Object.keys(obj)) {
      const sub = Object.prototype.hasOwnProperty.call(properties, key) ? properties[key] : undefined;
      if (sub) problemsOf(sub, obj[key], found);
      else if (schema.additionalProperties === false) found.add(400);
      else if (schema.additionalProperties && typeof schema.additionalProperties === "object")
        problemsOf(schema.additionalProperties, obj[key], found);
    }
  }
  return found;
}

// ---------------------------------------------------------------------------------------------
// Parameters: what a text in a path segment, query or header means for a parameter's schema.

export type ParamReading =
  | { verdict: "ok"; value: unknown }
  | { verdict: "bad" }
  /** The document does not settle it (e.g. leading zeros): either reading is right. */
  | { verdict: "either"; value: unknown };

const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;
const LEADING_ZEROS = /^-?0\d+(?:\.\d+)?(?:[eE][+-]?\d+)?$/;
const PLAIN_DECIMAL = /^-?(?:0|[1-9]\d*)$/;

/**
 * A parameter's text against its schema. Integers must be written as JSON numbers ("Order and user
 * ids are JSON numbers"): `12` is an integer; `1.0` and `1e1` may be read by value or refused; `0x1`, `+1`, ` 1`, `1_0`,
 * `Infinity` are not numbers at all. Strings are checked by length in code points and pattern.
 */
export function readParam(param: ParamModel, text: string): ParamReading {
  const schema = param.schema;
  if (schema.type === "integer") {
    // Plain decimals are integers; other JSON-number spellings (1.0, 1e3) may be read or refused (400).
    const numeric = PLAIN_DECIMAL.test(text)
      ? "json"
      : JSON_NUMBER.test(text) || LEADING_ZEROS.test(text)
        ? "either"
        : "bad";
    if (numeric === "bad") return { verdict: "bad" };
    const value = Number(text);
    const fine = Number.isInteger(value) && problemsOf(schema, value).size === 0;
    if (!fine) return { verdict: "bad" };
    return numeric === "json" ? { verdict: "ok", value } : { verdict: "either", value };
  }
  if (schema.type === "string" || schema.type === undefined) {
    return problemsOf({ ...schema, type: "string" }, text).size === 0
      ? { verdict: "ok", value: text }
      : { verdict: "bad" };
  }
  throw new Error(`parameter ${param.name}: type ${String(schema.type)} is not covered by the fuzzer`);
}
