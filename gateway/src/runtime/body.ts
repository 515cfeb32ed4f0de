// Reading a request body: size limit (413), media type (415), UTF-8 and JSON syntax (400). A JSON
// body is one JSON value; an NDJSON body (application/x-ndjson, where an operation takes it) is one
// JSON value per line.
import type { IncomingMessage } from "node:http";
import { edgeError } from "./errors.js";

const utf8 = new TextDecoder("utf-8", { fatal: true });

function mediaTypeOf(contentType: string | undefined): "json" | "ndjson" | undefined {
  if (!contentType) return undefined;
  const [type, ...params] = contentType.split(";").map((s) => s.trim().toLowerCase());
  const charset = params.find((p) => p.startsWith("charset="));
  if (charset && charset !== "charset=utf-8" && charset !== 'charset="utf-8"') return undefined;
  if (type === "application/json" || (type?.startsWith("application/") && type.endsWith("+json"))) return "json";
  if (type === "application/x-ndjson") return "ndjson";
  return undefined;
}

/** One line of an NDJSON body: its number (from 1, blank lines counted) and its value, unless it is no JSON. */
export interface NdjsonLine {
  line: number;
  value?: unknown;
  unparsable?: true;
}

export type RequestBody = { media: "json"; value: unknown } | { media: "ndjson"; lines: NdjsonLine[] };

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

/** The body as JSON, or — when `ndjson` allows it and the client says so — as NDJSON lines. */
export async function readRequestBody(req: IncomingMessage, maxBytes: number, ndjson: boolean): Promise<RequestBody> {
  const tooLarge = () => edgeError("PAYLOAD_TOO_LARGE", `the request body is larger than ${maxBytes} bytes`);
  if (Number(req.headers["content-length"] ?? 0) > maxBytes) refuse(req, tooLarge());
  const media = mediaTypeOf(req.headers["content-type"]);
  if (media === undefined || (media === "ndjson" && !ndjson)) {
    refuse(
      req,
      edgeError(
        "UNSUPPORTED_MEDIA_TYPE",
        ndjson
          ? "the request body must be application/json or application/x-ndjson (UTF-8)"
          : "the request body must be application/json (UTF-8)",
      ),
    );
  }
  const bytes = await collect(req, maxBytes);
  if (!bytes) refuse(req, tooLarge());
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw edgeError("INVALID_REQUEST", "the request body is not valid UTF-8");
  }
  if (media === "ndjson") return { media, lines: ndjsonLines(text) };
  if (text.trim() === "") throw edgeError("INVALID_REQUEST", "a JSON request body is required");
  try {
    return { media, value: JSON.parse(text) as unknown };
  } catch {
    throw edgeError("INVALID_REQUEST", "the request body is not valid JSON");
  }
}

/**
 * NDJSON: one JSON value per line (LF, or CRLF); blank lines (JSON whitespace only) are skipped but counted. A line that is
 * no JSON is kept as such (the route decides what it means), but a body without a single JSON line
 * is not NDJSON at all.
 */
function ndjsonLines(text: string): NdjsonLine[] {
  const lines: NdjsonLine[] = [];
  text.split("\n").forEach((raw, i) => {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (/^[ \t\r]*$/.test(line)) return;
    try {
      lines.push({ line: i + 1, value: JSON.parse(line) as unknown });
    } catch {
      lines.push({ line: i + 1, unparsable: true });
    }
  });
  if (lines.length === 0)
    throw edgeError("INVALID_REQUEST", "an NDJSON request body needs at least one line (one JSON value per line)");
  if (lines.every((l) => l.unparsable))
    throw edgeError("INVALID_REQUEST", "the request body is not NDJSON: no line of it is a JSON value");
  return lines;
}
