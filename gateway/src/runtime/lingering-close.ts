// Closing a connection without losing its last answer. Node's HTTP server closes a connection after
// an answer (the client sent `Connection: close`, or the answer carries it) with `destroySoon()`: a
// FIN once the answer is written, then the socket is destroyed. When the gateway answered before it
// had read the whole request — a refusal (413, 415, 401, 429, 503, …) while the body still arrives —
// bytes are left unread then, and closing a socket with unread bytes sends a reset, which can destroy
// the answer in the client's buffers before it reads it (RFC 9112 §9.6). So every connection closes
// lingering instead: the FIN goes after the answer, what the client still sends is read and dropped
// (Node's parser discards the rest of a body nobody reads), and the socket closes once the client has
// closed its side too — or after LINGER_MS at the most.
import type { Server } from "node:http";
import type { Socket } from "node:net";

/** The longest a closing connection waits for its client to finish sending and close its side. */
export const LINGER_MS = 2_000;

/** Has every connection of `server` close lingering: set once per connection, nothing per request. */
export function closeConnectionsLingering(server: Server): void {
  server.on("connection", lingerWhenClosing);
}

function lingerWhenClosing(socket: Socket): void {
  socket.destroySoon = closeLingering;
}

function closeLingering(this: Socket): void {
  if (this.writable) this.end();
  // The client's FIN ends the read side, and the socket then closes by itself (its write side
  // having finished). A client that neither stops sending nor closes is cut off.
  if (!this.destroyed) setTimeout(destroy, LINGER_MS, this).unref();
}

function destroy(socket: Socket): void {
  socket.destroy();
}
