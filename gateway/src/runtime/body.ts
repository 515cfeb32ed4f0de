// Reading a JSON request body: size limit (413), media type (415), UTF-8 and JSON syntax (400).
import type { IncomingMessage } from "node:http";
import { edgeError } from "./errors.js";

const utf8 = new TextDecoder("utf-8", { fatal: true });

function isJsonMediaType(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const [type, ...params] = contentType.split(";").map((s) => s.trim().toLowerCase());
  if (type !== "application/json" && !(type?.startsWith("application/") && type.endsWith("+json"))) return false;
  const charset = params.find((p) => p.startsWith("charset="));
  return !charset || charset === "charset=utf-8" || charset === 'charset="utf-8"';
}

export async function readJsonBody(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  const declared = req.headers["content-length"];
  if (declared !== undefined && Number(declared) > maxBytes) {
    req.resume();
    throw edgeError("PAYLOAD_TOO_LARGE", `the request body is larger than ${maxBytes} bytes`, { connection: "close" });
  }
  if (!isJsonMediaType(req.headers["content-type"])) {
    req.resume();
    throw edgeError("UNSUPPORTED_MEDIA_TYPE", "the request body must be application/json (UTF-8)");
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw edgeError("PAYLOAD_TOO_LARGE", `the request body is larger than ${maxBytes} bytes`, { connection: "close" });
    chunks.push(chunk);
  }
  let text: string;
  try {
    text = utf8.decode(Buffer.concat(chunks));
  } catch {
    throw edgeError("INVALID_REQUEST", "the request body is not valid UTF-8");
  }
  if (text.trim() === "") throw edgeError("INVALID_REQUEST", "a JSON request body is required");
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw edgeError("INVALID_REQUEST", "the request body is not valid JSON");
  }
}
