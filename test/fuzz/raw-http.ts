// A deliberately dumb HTTP/1.1 client over a plain TCP socket, for fuzzing: it sends exactly the
// bytes it is given (request line, header lines, body), so that requests fetch() or node:http would
// refuse or normalise — bad percent-encoding, `..` segments, raw non-ASCII bytes, control characters
// in header values, duplicate or missing framing headers, 17 KiB header blocks — reach the server as
// written. Every request uses its own connection (`Connection: close`), and the answer is read to the
// end of the connection (an event stream is cut after its header block).
import { connect } from "node:net";

export type HeaderValue = string | Buffer;

export interface RawRequest {
  method: string;
  /** The request-target exactly as sent (a Buffer for raw non-ASCII bytes). */
  target: string | Buffer;
  /** Header lines in order; Host and Connection: close are added unless `raw` is set. */
  headers: readonly (readonly [string, HeaderValue])[];
  body?: Buffer | undefined;
  /**
   * How the body is framed: Content-Length with its true length (default), `chunked`, a declared
   * length that is not the body's (`{ declared }`), or `none` (no framing header at all).
   */
  framing?: "length" | "chunked" | "none" | { declared: number } | undefined;
  /** The whole request as bytes, sent as it is (protocol-level garbage). */
  raw?: Buffer | undefined;
}

export interface RawResponse {
  status: number;
  /** Lower-case header names; repeated headers joined with ", ". */
  headers: Record<string, string>;
  body: Buffer;
  /** The peer reset or closed the connection before a complete status line and header block arrived. */
  reset?: string | undefined;
  ms: number;
}

const CRLF = "\r\n";

/** The request's bytes as they go on the wire. */
export function serialize(req: RawRequest, host: string): Buffer {
  if (req.raw) return req.raw;
  const parts: Buffer[] = [];
  const line = (s: string | Buffer) => parts.push(typeof s === "string" ? Buffer.from(s, "latin1") : s);
  line(`${req.method} `);
  line(req.target);
  line(` HTTP/1.1${CRLF}`);
  line(`Host: ${host}${CRLF}`);
  line(`Connection: close${CRLF}`);
  for (const [name, value] of req.headers) {
    line(`${name}: `);
    line(value);
    line(CRLF);
  }
  const body = req.body;
  const framing = req.framing ?? "length";
  for (const [name, value] of framingHeaders(req)) line(`${name}: ${value}${CRLF}`);
  line(CRLF);
  if (framing === "chunked") {
    if (body && body.length > 0) {
      // Chunks of at most 16 KiB, as a streaming client would send them.
      for (let at = 0; at < body.length; at += 16 * 1024) {
        const chunk = body.subarray(at, Math.min(body.length, at + 16 * 1024));
        line(`${chunk.length.toString(16)}${CRLF}`);
        line(chunk);
        line(CRLF);
      }
    }
    line(`0${CRLF}${CRLF}`);
  } else if (body) {
    line(body);
  }
  return Buffer.concat(parts);
}

/** The framing header the request is sent with (Content-Length or Transfer-Encoding), if any. */
export function framingHeaders(req: RawRequest): [string, string][] {
  const framing = req.framing ?? "length";
  if (framing === "chunked") return [["Transfer-Encoding", "chunked"]];
  if (framing === "none") return [];
  if (typeof framing === "object") return [["Content-Length", String(framing.declared)]];
  return req.body !== undefined ? [["Content-Length", String(req.body.length)]] : [];
}

function parseHead(head: string): { status: number; headers: Record<string, string> } | undefined {
  const lines = head.split(CRLF);
  const m = /^HTTP\/1\.[01] (\d{3})(?: .*)?$/.exec(lines[0] ?? "");
  if (!m) return undefined;
  const headers: Record<string, string> = {};
  for (const l of lines.slice(1)) {
    const colon = l.indexOf(":");
    if (colon <= 0) continue;
    const name = l.slice(0, colon).trim().toLowerCase();
    const value = l.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  return { status: Number(m[1]), headers };
}

function dechunk(body: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  while (at < body.length) {
    const eol = body.indexOf(CRLF, at);
    if (eol === -1) break;
    const size = parseInt(body.subarray(at, eol).toString("latin1"), 16);
    if (!Number.isFinite(size) || size === 0) break;
    out.push(body.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
  return Buffer.concat(out);
}

/**
 * Sends one request on a fresh connection and reads the answer. Never rejects: a connection that
 * is reset or closed without an answer comes back as `reset`, a silent server as `reset: "timeout"`.
 */
export function send(
  port: number,
  req: RawRequest,
  options: { timeoutMs: number; method?: string } = { timeoutMs: 15_000 },
): Promise<RawResponse> {
  const started = performance.now();
  const isHead = (options.method ?? req.method) === "HEAD";
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let settled = false;
    const socket = connect(port, "127.0.0.1");
    const finish = (reset?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      let all: Buffer = Buffer.concat(chunks);
      let end = all.indexOf("\r\n\r\n");
      let head = end === -1 ? undefined : parseHead(all.subarray(0, end).toString("latin1"));
      // Interim answers (100 Continue) come before the real one.
      while (head && head.status >= 100 && head.status < 200) {
        all = all.subarray(end + 4);
        end = all.indexOf("\r\n\r\n");
        head = end === -1 ? undefined : parseHead(all.subarray(0, end).toString("latin1"));
      }
      const ms = performance.now() - started;
      if (!head) {
        resolve({
          status: 0,
          headers: {},
          body: Buffer.alloc(0),
          reset: reset ?? "connection closed without a complete answer",
          ms,
        });
        return;
      }
      let body = all.subarray(end + 4);
      if (/\bchunked\b/i.test(head.headers["transfer-encoding"] ?? "")) body = dechunk(body);
      else if (head.headers["content-length"] !== undefined)
        body = body.subarray(0, Number(head.headers["content-length"]));
      resolve({ status: head.status, headers: head.headers, body: isHead ? Buffer.alloc(0) : body, ms });
    };
    const timer = setTimeout(() => finish("timeout"), options.timeoutMs);
    socket.on("data", (d: Buffer) => {
      chunks.push(d);
      // An event stream never ends by itself: its header block is all we look at.
      const head = Buffer.concat(chunks).toString("latin1");
      const end = head.search(/\r\n\r\n(?!HTTP\/)/);
      if (end !== -1 && !/^HTTP\/1\.[01] 1\d\d/.test(head)) {
        const block = head.slice(0, end);
        if (/^content-type:\s*text\/event-stream/im.test(block) || isHead) finish();
      }
    });
    socket.on("end", () => finish());
    socket.on("close", () => finish());
    socket.on("error", (err: NodeJS.ErrnoException) => finish(err.code ?? err.message));
    socket.on("connect", () => {
      socket.write(serialize(req, `127.0.0.1:${port}`));
    });
  });
}
