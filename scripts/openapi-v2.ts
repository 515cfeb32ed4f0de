// `npm run openapi:v2`: writes gateway/openapi/v2.yaml from v1.yaml. While v1 is served, the two
// differ only by what this file changes — the breaking changes of v2 (a user's full_name becomes
// name {given, family}; a query parameter an operation does not declare is refused, where v1 ignores
// it), the /v2 prefix, and the resources only v2 has (v2-only/webhooks.yaml: webhook endpoints,
// made after v1's deprecation) — so every additive change to v1 reaches v2 by running it
// again (a test fails when v2.yaml is stale). Once v1 is removed, v2.yaml is edited directly and this
// goes.
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parse, stringify } from "yaml";

const V1 = fileURLToPath(new URL("../gateway/openapi/v1.yaml", import.meta.url));
/** What v2 has and v1 never will: new resources made after v1's deprecation (webhook endpoints). */
const V2_ONLY = fileURLToPath(new URL("../gateway/openapi/v2-only/webhooks.yaml", import.meta.url));
export const V2_PATH = fileURLToPath(new URL("../gateway/openapi/v2.yaml", import.meta.url));

type Json = Record<string, any>;

const V2_VERSIONS = `- **Versions**: this is v2. \`GET /versions\` lists the published versions with their status,
  deprecation and sunset dates. v2 differs from v1 in two breaking changes: a user's \`full_name\` is
  replaced by \`name: {given, family}\` (on \`User\` and \`UserCreate\`) — the whole name is the parts
  joined by a space, and a user created through v1 with a whole name has all of it as \`given\` and an
  empty \`family\` — and a query parameter an operation does not declare is refused (v1 ignores it).
  Every other route of v1 is identical in v2, and v2 alone has the webhook endpoints
  (\`/v2/webhook-endpoints\`, made after v1's deprecation). Internal consumers may instead ask for v2
  by media type on the /v1 paths (\`Accept: application/vnd.api.v2+json\`).
`;

const V2_UNKNOWN_QUERY = `- **Query parameters an operation does not declare** are refused: **400** \`INVALID_REQUEST\` naming
  the parameter, with the declared one it most likely meant (\`unknown query parameter lmit (did you
  mean limit?)\`) or the ones the route takes. v1 ignores them — refusing them there would tighten
  its validation, a breaking change — and names them in \`X-Ignored-Query-Parameters\`. The rule is
  this document's \`x-switchyard-unknown-query-parameters\`.
`;

/** Replaces /v1 with /v2 in every string of the document (paths, descriptions, examples). */
function rebase(value: unknown): unknown {
  if (typeof value === "string") return value.replace(/\/v1(?=[/`'"\s)]|$)/g, "/v2");
  if (Array.isArray(value)) return value.map(rebase);
  if (value && typeof value === "object")
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [rebase(k) as string, rebase(v)]));
  return value;
}

export function v2Document(v1Text: string, v2OnlyText = readFileSync(V2_ONLY, "utf8")): string {
  const v1 = parse(v1Text) as Json;
  const versions = /- \*\*Versions\*\*:[\s\S]*?(?=\n- \*\*)/;
  const unknownQuery = /- \*\*Query parameters an operation does not declare\*\*[\s\S]*?(?=\n- \*\*)/;
  const description = String(v1.info.description)
    .replace(versions, V2_VERSIONS.trimEnd())
    .replace(unknownQuery, V2_UNKNOWN_QUERY.trimEnd());
  const doc = rebase({
    ...v1,
    info: { ...v1.info, version: "2.0.0", description },
    "x-switchyard-unknown-query-parameters": "refused",
  }) as Json;
  const schemas = doc.components.schemas as Json;
  schemas.PersonName = {
    type: "object",
    additionalProperties: false,
    description: "A name in parts. The whole name (v1's full_name) is given and family joined by a space.",
    required: ["given", "family"],
    properties: {
      given: { type: "string", minLength: 1, maxLength: 100 },
      family: {
        type: "string",
        maxLength: 99,
        description: "Empty when there is none, or when the user was created through v1 with a whole name.",
      },
    },
  };
  for (const name of ["User", "UserCreate"]) {
    const schema = schemas[name] as Json;
    // In full_name's place, so the representation reads as before.
    schema.properties = Object.fromEntries(
      Object.entries(schema.properties as Json).map(([k, v]) =>
        k === "full_name" ? ["name", { $ref: "#/components/schemas/PersonName" }] : [k, v],
      ),
    );
    schema.required = (schema.required as string[]).map((r) => (r === "full_name" ? "name" : r));
  }
  // v2's own resources, after v1's (their paths are /v2 already).
  const v2Only = parse(v2OnlyText) as Json;
  doc.tags = [...(doc.tags as Json[]), ...(v2Only.tags as Json[])];
  doc.paths = { ...(doc.paths as Json), ...(v2Only.paths as Json) };
  // What the tenant's endpoints receive (OpenAPI 3.1 `webhooks`): v2 only too.
  doc.webhooks = v2Only.webhooks;
  for (const [kind, entries] of Object.entries(v2Only.components as Json))
    (doc.components as Json)[kind] = { ...((doc.components as Json)[kind] as Json), ...(entries as Json) };
  return `# Generated from v1.yaml and v2-only/webhooks.yaml by scripts/openapi-v2.ts (npm run openapi:v2): do not edit while v1 is served.\n${stringify(doc, { lineWidth: 0 })}`;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(V2_PATH, v2Document(readFileSync(V1, "utf8")));
  console.log(`wrote ${V2_PATH}`);
}
