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

// A refused body is answered at once and the rest of it read and dropped (never a destroyed
// socket under a client that is still uploading: it could not read the 4xx, RFC 9112 §9.6).
// Only a body declared larger than this gets `connection: close` instead.
const DISCARD_LIMIT_BYTES = 16 * 1024 * 1024;

/** The body's bytes, or undefined once it passes maxBytes (the rest then flows away unread). */
function collect(req: IncomingMessage, maxBytes: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      req.off("aborted", onError);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        done();
        req.resume();
        resolve(undefined);
      } else chunks.push(chunk);
    };
    const onEnd = () => {
      done();
      resolve(Buffer.concat(chunks));
    };
    // A body cut off or malformed on the wire (bad chunking, the client went away) is the request's fault.
    const onError = () => {
      done();
      reject(edgeError("INVALID_REQUEST", "the request body was cut off or malformed"));
    };
    req.on("data", onData).on("end", onEnd).on("error", onError).on("aborted", onError);
  });
}

function refuse(req: IncomingMessage, error: ReturnType<typeof edgeError>): never {
  req.resume();
  if (Number(req.headers["content-length"] ?? 0) > DISCARD_LIMIT_BYTES) error.headers.connection = "close";
  throw error;
}

export async function readJsonBody(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  const tooLarge = () => edgeError("PAYLOAD_TOO_LARGE", `the request body is larger than ${maxBytes} bytes`);
  if (Number(req.headers["content-length"] ?? 0) > maxBytes) refuse(req, tooLarge());
  if (!isJsonMediaType(req.headers["content-type"])) refuse(req, edgeError("UNSUPPORTED_MEDIA_TYPE", "the request body must be application/json (UTF-8)"));
  const bytes = await collect(req, maxBytes);
  if (!bytes) refuse(req, tooLarge());
  let text: string;
  try {
    text = utf8.decode(bytes);
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
