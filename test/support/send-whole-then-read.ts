// A client in the order that loses an answer to a server's reset: it writes its whole request
// (`Connection: close`, a chunked body in 16 KiB chunks) before it reads anything, then reads to the
// end of the connection. A server that answers before reading the body and then closes with bytes
// unread sends a reset, which destroys the answer still waiting in this client's buffers.
import { connect } from "node:net";

export interface WholeRequest {
  path: string;
  /** Header lines besides Host, Connection and Transfer-Encoding, e.g. "Authorization: Bearer …". */
  headers: string[];
  /** Length of the chunked JSON body. */
  bodyBytes: number;
}

/** What was read (the status line first), or "no answer (<why>)". */
export function sendWholeThenRead(port: number, request: WholeRequest): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    let settled = false;
    const finish = (why: string) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      const text = Buffer.concat(chunks).toString("utf8");
      resolve(text.startsWith("HTTP/1.1 ") ? text : `no answer (${why})`);
    };
    socket.on("data", (d: Buffer) => chunks.push(d));
    socket.on("end", () => finish("end"));
    socket.on("error", (err: NodeJS.ErrnoException) => finish(err.code ?? err.message));
    socket.on("connect", () => {
      socket.pause();
      const head = [
        `POST ${request.path} HTTP/1.1`,
        "Host: 127.0.0.1",
        "Connection: close",
        ...request.headers,
        "Transfer-Encoding: chunked",
      ];
      socket.write(`${head.join("\r\n")}\r\n\r\n`);
      const body = Buffer.from(`{"title":"${"x".repeat(Math.max(0, request.bodyBytes - 14))}"}`);
      let at = 0;
      const next = () => {
        if (at >= body.length) {
          socket.write("0\r\n\r\n", () => socket.resume());
          return;
        }
        const chunk = body.subarray(at, at + 16 * 1024);
        at += chunk.length;
        socket.write(`${chunk.length.toString(16)}\r\n`);
        socket.write(chunk);
        // A moment between chunks: the answer, and the server's close, come while the body still arrives.
        socket.write("\r\n", () => setTimeout(next, 2));
      };
      next();
    });
    setTimeout(() => finish("timeout"), 15_000).unref();
  });
}
