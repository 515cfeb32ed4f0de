// Compares two versions of the public OpenAPI document and lists the breaking changes (contract
// §9): a removed operation, a removed or retyped field, a new required input, tightened validation.
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
    current = { ...((target ?? {}) as Json), ...Object.fromEntries(Object.entries(current).filter(([k]) => k !== "$ref")) };
  }
  return current;
}

const typesOf = (s: Json): string[] => (s.type === undefined ? [] : ([] as string[]).concat(s.type as string | string[]).sort());

function compareSchemas(oldDoc: Json, newDoc: Json, oldNode: unknown, newNode: unknown, where: string, direction: Direction, out: Break[], depth = 0): void {
  if (depth > 20) return;
  const o = deref(oldDoc, oldNode);
  const n = deref(newDoc, newNode);
  const oldTypes = typesOf(o);
  const newTypes = typesOf(n);
  if (oldTypes.length > 0 && newTypes.length > 0) {
    // A request may accept more types; a response may not start sending other ones.
    const lost = direction === "request" ? oldTypes.filter((t) => !newTypes.includes(t) && !(t === "integer" && newTypes.includes("number"))) : newTypes.filter((t) => !oldTypes.includes(t));
    if (lost.length > 0) out.push({ where, what: `type changed from ${oldTypes.join("|")} to ${newTypes.join("|")}` });
  }
  if (direction === "request") {
    const oldEnum = o.enum as unknown[] | undefined;
    const newEnum = n.enum as unknown[] | undefined;
    if (newEnum && (!oldEnum || oldEnum.some((v) => !newEnum.includes(v)))) out.push({ where, what: "enum tightened" });
    const tightened = (k: string, stricter: (a: number, b: number) => boolean) => {
      const a = o[k] as number | undefined;
      const b = n[k] as number | undefined;
      if (b !== undefined && (a === undefined || stricter(a, b))) out.push({ where, what: `${k} tightened (${a ?? "none"} → ${b})` });
    };
    tightened("maxLength", (a, b) => b < a);
    tightened("maximum", (a, b) => b < a);
    tightened("minLength", (a, b) => b > a);
    tightened("minimum", (a, b) => b > a);
    if (n.pattern !== undefined && n.pattern !== o.pattern) out.push({ where, what: "pattern changed" });
    const oldRequired = new Set((o.required ?? []) as string[]);
    for (const r of (n.required ?? []) as string[]) if (!oldRequired.has(r)) out.push({ where: `${where}.${r}`, what: "became required" });
  } else {
    const newRequired = new Set((n.required ?? []) as string[]);
    for (const r of (o.required ?? []) as string[]) if (!newRequired.has(r)) out.push({ where: `${where}.${r}`, what: "no longer always present" });
  }
  const oldProps = (o.properties ?? {}) as Json;
  const newProps = (n.properties ?? {}) as Json;
  for (const [name, schema] of Object.entries(oldProps)) {
    if (!(name in newProps)) {
      if (direction === "response" || n.additionalProperties === false) out.push({ where: `${where}.${name}`, what: "field removed" });
      continue;
    }
    compareSchemas(oldDoc, newDoc, schema, newProps[name], `${where}.${name}`, direction, out, depth + 1);
  }
  if (o.items || n.items) compareSchemas(oldDoc, newDoc, o.items, n.items, `${where}[]`, direction, out, depth + 1);
}

function parametersOf(doc: Json, pathItem: Json, op: Json): Map<string, Json> {
  const all = [...((pathItem.parameters ?? []) as unknown[]), ...((op.parameters ?? []) as unknown[])].map((p) => deref(doc, p));
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
      for (const [key, p] of parametersOf(newDoc, newItem!, newOp)) {
        const before = oldParams.get(key);
        if (p.required && !before?.required) out.push({ where: `${where} ${key}`, what: "parameter became required" });
        if (before) compareSchemas(oldDoc, newDoc, before.schema, p.schema, `${where} ${key}`, "request", out);
      }
      const body = (op: Json, doc: Json) => ((deref(doc, op.requestBody).content as Json | undefined)?.["application/json"] as Json | undefined)?.schema;
      const oldBody = body(oldOp, oldDoc);
      const newBody = body(newOp, newDoc);
      if (oldBody && newBody) compareSchemas(oldDoc, newDoc, oldBody, newBody, `${where} body`, "request", out);
      if (!oldBody && newBody && deref(newDoc, newOp.requestBody).required) out.push({ where, what: "request body became required" });
      const oldResponses = (oldOp.responses ?? {}) as Json;
      const newResponses = (newOp.responses ?? {}) as Json;
      for (const [status, rawResponse] of Object.entries(oldResponses)) {
        const newResponse = newResponses[status];
        if (!newResponse) {
          if (status.startsWith("2")) out.push({ where: `${where} → ${status}`, what: "success response removed" });
          continue;
        }
        const schemaOf = (doc: Json, r: unknown) => ((deref(doc, r).content as Json | undefined)?.["application/json"] as Json | undefined)?.schema;
        const a = schemaOf(oldDoc, rawResponse);
        const b = schemaOf(newDoc, newResponse);
        if (a && b) compareSchemas(oldDoc, newDoc, a, b, `${where} → ${status}`, "response", out);
      }
    }
  }
  return out;
}
