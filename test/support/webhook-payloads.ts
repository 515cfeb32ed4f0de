// What the v2 document's `webhooks` section says each event's payload is: a check that what the
// webhooks service sends matches what partners are told (and the breaking-change check holds to).
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => void;
const DOCUMENT_ID = "switchyard-v2";

/** The problems of `payload` against its type's documented schema (none: it is what the document says). */
export function documentedPayloadProblems(): (payload: { type: string }) => string[] {
  const document = parse(readFileSync(new URL("../../gateway/openapi/v2.yaml", import.meta.url), "utf8")) as Record<
    string,
    any
  >;
  // The OpenAPI document's own keywords (examples, x-…) are not JSON Schema's: not strict.
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema({ $id: DOCUMENT_ID, components: document.components });
  return (payload) => {
    const ref = document.webhooks?.[payload.type]?.post?.requestBody?.content?.["application/json"]?.schema?.$ref;
    if (typeof ref !== "string") return [`no documented webhook ${payload.type}`];
    const validate = ajv.getSchema(`${DOCUMENT_ID}${ref}`)!;
    return validate(payload) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message ?? ""}`);
  };
}
