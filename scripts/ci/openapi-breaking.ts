// Compares two versions of a public OpenAPI document and lists the breaking changes (contract §9):
// a removed operation, parameter or media type; a removed, renamed or retyped field; a new required
// input; a tightened enum or validation; a changed or removed default; a changed error envelope.
// Additive changes pass: new optional fields, new operations, new enum values in responses.
import { isDeepStrictEqual } from "node:util";

type Json = Record<string, unknown>;
type Direction = "request" | "response";

export interface Break {
  where: string;
  what: string;
}

const METHODS = ["get", "put", "post", "delete", "patch"] as const;

function deref(doc: Json, node: unknown, seen = new Set<string>()): Json {
  let current = (node ?? {}) as Json;
  while (typeof current.$ref === "string") {
    const ref = current.$ref;
    if (seen.has(ref)) return {};
    seen.add(ref);
    let target: unknown = doc;
    for (const part of ref.replace(/^#\//, "").split("/")) target = (target as Json | undefined)?.[part];
    current = {
      ...((target ?? {}) as Json),
      ...Object.fromEntries(Object.entries(current).filter(([k]) => k !== "$ref")),
    };
  }
  return current;
}

const typesOf = (s: Json): string[] =>
  s.type === undefined ? [] : ([] as string[]).concat(s.type as string | string[]).sort();
const show = (v: unknown) => JSON.stringify(v);

/** What a schema accepts, without the words around it: two fields with the same shape look alike. */
function shape(doc: Json, node: unknown): string {
  const { description, example, examples, title, ...rest } = deref(doc, node);
  return JSON.stringify(rest);
}

function compareSchemas(
  oldDoc: Json,
  newDoc: Json,
  oldNode: unknown,
  newNode: unknown,
  where: string,
  direction: Direction,
  out: Break[],
  depth = 0,
): void {
  if (depth > 20) return;
  const o = deref(oldDoc, oldNode);
  const n = deref(newDoc, newNode);
  const oldTypes = typesOf(o);
  const newTypes = typesOf(n);
  if (oldTypes.length > 0 && newTypes.length > 0) {
    // A request may accept more types; a response may not start sending other ones.
    const lost =
      direction === "request"
        ? oldTypes.filter((t) => !newTypes.includes(t) && !(t === "integer" && newTypes.includes("number")))
        : newTypes.filter((t) => !oldTypes.includes(t));
    if (lost.length > 0) out.push({ where, what: `type changed from ${oldTypes.join("|")} to ${newTypes.join("|")}` });
  }
  // An absent value means the default, in a request as in a response: another default changes what
  // a client that leaves it out gets.
  if ("default" in o && !isDeepStrictEqual(o.default, n.default)) {
    out.push({
      where,
      what:
        "default" in n
          ? `default changed (${show(o.default)} → ${show(n.default)})`
          : `default removed (was ${show(o.default)})`,
    });
  }
  if (direction === "request") {
    const oldEnum = o.enum as unknown[] | undefined;
    const newEnum = n.enum as unknown[] | undefined;
    if (newEnum && (!oldEnum || oldEnum.some((v) => !newEnum.some((w) => isDeepStrictEqual(v, w)))))
      out.push({ where, what: "enum tightened" });
    const tightened = (k: string, stricter: (a: number, b: number) => boolean) => {
      const a = o[k] as number | undefined;
      const b = n[k] as number | undefined;
      if (typeof b === "number" && (typeof a !== "number" || stricter(a, b)))
        out.push({ where, what: `${k} tightened (${a ?? "none"} → ${b})` });
    };
    tightened("maxLength", (a, b) => b < a);
    tightened("maximum", (a, b) => b < a);
    tightened("exclusiveMaximum", (a, b) => b < a);
    tightened("maxItems", (a, b) => b < a);
    tightened("maxProperties", (a, b) => b < a);
    tightened("minLength", (a, b) => b > a);
    tightened("minimum", (a, b) => b > a);
    tightened("exclusiveMinimum", (a, b) => b > a);
    tightened("minItems", (a, b) => b > a);
    tightened("minProperties", (a, b) => b > a);
    // Every multiple of a is one of b only when a is a multiple of b (with room for 0.1 / 0.01).
    tightened("multipleOf", (a, b) => Math.abs(a / b - Math.round(a / b)) > 1e-9);
    for (const k of ["pattern", "format", "const"]) {
      if (n[k] !== undefined && !isDeepStrictEqual(n[k], o[k]))
        out.push({ where, what: `${k} tightened (${show(o[k]) ?? "none"} → ${show(n[k])})` });
    }
    if (n.uniqueItems === true && o.uniqueItems !== true)
      out.push({ where, what: "uniqueItems tightened (false → true)" });
    if (n.additionalProperties === false && o.additionalProperties !== false)
      out.push({ where, what: "additionalProperties tightened (unknown fields now refused)" });
    const oldRequired = new Set((o.required ?? []) as string[]);
    for (const r of (n.required ?? []) as string[])
      if (!oldRequired.has(r)) out.push({ where: `${where}.${r}`, what: "became required" });
  } else {
    const newRequired = new Set((n.required ?? []) as string[]);
    for (const r of (o.required ?? []) as string[])
      if (!newRequired.has(r)) out.push({ where: `${where}.${r}`, what: "no longer always present" });
  }
  const oldProps = (o.properties ?? {}) as Json;
  const newProps = (n.properties ?? {}) as Json;
  const added = Object.keys(newProps).filter((name) => !(name in oldProps));
  for (const [name, schema] of Object.entries(oldProps)) {
    if (!(name in newProps)) {
      // A request field may go from an open object (it is ignored then); a closed one refuses it.
      if (direction === "response" || n.additionalProperties === false) {
        const renamed = added.find((a) => shape(newDoc, newProps[a]) === shape(oldDoc, schema));
        out.push({
          where: `${where}.${name}`,
          what: renamed ? `field removed (renamed to "${renamed}"?)` : "field removed",
        });
      }
      continue;
    }
    compareSchemas(oldDoc, newDoc, schema, newProps[name], `${where}.${name}`, direction, out, depth + 1);
  }
  const isSchema = (s: unknown) => typeof s === "object" && s !== null;
  if (isSchema(o.additionalProperties) && isSchema(n.additionalProperties))
    compareSchemas(
      oldDoc,
      newDoc,
      o.additionalProperties,
      n.additionalProperties,
      `${where}.*`,
      direction,
      out,
      depth + 1,
    );
  if (o.items || n.items) compareSchemas(oldDoc, newDoc, o.items, n.items, `${where}[]`, direction, out, depth + 1);
}

/** A request body's or a response's media types: one taken away is refused (415) or never sent again. */
function compareContent(
  oldDoc: Json,
  newDoc: Json,
  oldContent: unknown,
  newContent: unknown,
  where: string,
  direction: Direction,
  out: Break[],
): void {
  for (const [mediaType, rawOld] of Object.entries((oldContent ?? {}) as Json)) {
    const rawNew = ((newContent ?? {}) as Json)[mediaType];
    if (!rawNew) {
      out.push({ where, what: `media type ${mediaType} removed` });
      continue;
    }
    const a = (rawOld as Json).schema;
    const b = (rawNew as Json).schema;
    if (a && b) compareSchemas(oldDoc, newDoc, a, b, where, direction, out);
  }
}

function parametersOf(doc: Json, pathItem: Json, op: Json): Map<string, Json> {
  const all = [...((pathItem.parameters ?? []) as unknown[]), ...((op.parameters ?? []) as unknown[])].map((p) =>
    deref(doc, p),
  );
  return new Map(all.map((p) => [`${String(p.in)}:${String(p.name).toLowerCase()}`, p]));
}

export function breakingChanges(oldDoc: Json, newDoc: Json): Break[] {
  const out: Break[] = [];
  const oldPaths = (oldDoc.paths ?? {}) as Json;
  const newPaths = (newDoc.paths ?? {}) as Json;
  for (const [path, rawOldItem] of Object.entries(oldPaths)) {
    const oldItem = rawOldItem as Json;
    const newItem = newPaths[path] as Json | undefined;
    for (const method of METHODS) {
      const oldOp = oldItem[method] as Json | undefined;
      if (!oldOp) continue;
      const where = `${method.toUpperCase()} ${path}`;
      const newOp = newItem?.[method] as Json | undefined;
      if (!newOp) {
        out.push({ where, what: "operation removed" });
        continue;
      }
      const oldParams = parametersOf(oldDoc, oldItem, oldOp);
      const newParams = parametersOf(newDoc, newItem!, newOp);
      for (const [key, p] of newParams) {
        const before = oldParams.get(key);
        if (p.required && !before?.required) out.push({ where: `${where} ${key}`, what: "parameter became required" });
        if (before) compareSchemas(oldDoc, newDoc, before.schema, p.schema, `${where} ${key}`, "request", out);
      }
      // A path parameter can not go without the path changing (operation removed above).
      for (const key of oldParams.keys())
        if (!newParams.has(key) && !key.startsWith("path:"))
          out.push({ where: `${where} ${key}`, what: "parameter removed" });
      const oldBody = deref(oldDoc, oldOp.requestBody);
      const newBody = deref(newDoc, newOp.requestBody);
      if (newBody.required && !oldBody.required) out.push({ where, what: "request body became required" });
      compareContent(oldDoc, newDoc, oldBody.content, newBody.content, `${where} body`, "request", out);
      const oldResponses = (oldOp.responses ?? {}) as Json;
      const newResponses = (newOp.responses ?? {}) as Json;
      for (const [status, rawResponse] of Object.entries(oldResponses)) {
        const newResponse = newResponses[status];
        if (!newResponse) {
          if (status.startsWith("2")) out.push({ where: `${where} → ${status}`, what: "success response removed" });
          continue;
        }
        const found: Break[] = [];
        compareContent(
          oldDoc,
          newDoc,
          deref(oldDoc, rawResponse).content,
          deref(newDoc, newResponse).content,
          `${where} → ${status}`,
          "response",
          found,
        );
        // Every failure shares one body, {"error", "code"} (docs/api.md: Errors): a change there breaks
        // every client's error handling at once, so it is named as such.
        const isError = !/^[23]/.test(status);
        out.push(...found.map((b) => (isError ? { where: b.where, what: `error envelope changed: ${b.what}` } : b)));
      }
    }
  }
  breakingWebhookChanges(oldDoc, newDoc, out);
  return out;
}

/**
 * The webhooks (OpenAPI 3.1 `webhooks`): what partners' endpoints receive. The body is ours to send
 * and theirs to read, so it is held to what a response is held to; an event no longer sent is removed.
 */
function breakingWebhookChanges(oldDoc: Json, newDoc: Json, out: Break[]): void {
  const newHooks = (newDoc.webhooks ?? {}) as Json;
  for (const [name, rawOldItem] of Object.entries((oldDoc.webhooks ?? {}) as Json)) {
    for (const method of METHODS) {
      const oldOp = (rawOldItem as Json)[method] as Json | undefined;
      if (!oldOp) continue;
      const where = `webhook ${name}`;
      const newOp = (newHooks[name] as Json | undefined)?.[method] as Json | undefined;
      if (!newOp) {
        out.push({ where, what: "webhook removed" });
        continue;
      }
      const oldBody = deref(oldDoc, oldOp.requestBody).content;
      compareContent(oldDoc, newDoc, oldBody, deref(newDoc, newOp.requestBody).content, where, "response", out);
    }
  }
}
