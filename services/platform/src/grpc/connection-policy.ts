// What every client connection to a gRPC server is held to beyond what grpc-js enforces itself:
// pings. A client may ping to keep a quiet connection alive, but not faster than the server allows
// while nothing is sent to it (gRPC's keepalive enforcement, which grpc-js's server does not do):
// past a few such pings it is told GOAWAY ENHANCE_YOUR_CALM ("too_many_pings") and the connection
// closes, as gRPC core and grpc-go servers do. (The cap on concurrent calls per connection is
// grpc-js's own `grpc.max_concurrent_streams`, set in server.ts.)
import { constants, type Http2Server, type ServerHttp2Session } from "node:http2";
import type { Server, ServerCredentials } from "@grpc/grpc-js";

export interface PingPolicy {
  /** A ping sooner than this after the previous one, with nothing sent in between, is a strike; 0: never. */
  minIntervalMs: number;
  /** Strikes tolerated; the next one ends the connection. */
  maxStrikes: number;
}

/** What the server writes to answer one ping (a PING frame with ACK: 9 bytes of header, 8 of payload). */
const PING_ACK_BYTES = 17;
/** The debug data gRPC clients read to back off their keepalive (gRFC A8). */
const TOO_MANY_PINGS = Buffer.from("too_many_pings");
/** Time for the GOAWAY to leave before the connection is destroyed. */
const GOAWAY_FLUSH_MS = 100;

/**
 * Polices a connection's pings. "Nothing sent in between" is read off the bytes the server wrote
 * since the previous ping: more than that ping's answer means headers or data went out, which resets
 * the strikes (gRPC core resets them on every header or data frame it sends).
 */
export function policePings(
  session: ServerHttp2Session,
  policy: PingPolicy,
  onTooMany?: (session: ServerHttp2Session) => void,
): void {
  if (policy.minIntervalMs <= 0) return;
  let lastPingAt: number | undefined;
  let writtenAtLastPing = 0;
  let strikes = 0;
  session.on("ping", () => {
    if (session.closed || session.destroyed) return;
    const now = performance.now();
    const written = session.socket?.bytesWritten ?? 0;
    const sentSince = written - writtenAtLastPing > PING_ACK_BYTES;
    if (lastPingAt === undefined || sentSince) strikes = 0;
    else if (now - lastPingAt < policy.minIntervalMs) strikes++;
    lastPingAt = now;
    writtenAtLastPing = written;
    if (strikes <= policy.maxStrikes) return;
    onTooMany?.(session);
    session.goaway(constants.NGHTTP2_ENHANCE_YOUR_CALM, session.state.lastProcStreamID ?? 0, TOO_MANY_PINGS);
    setTimeout(() => session.destroy(), GOAWAY_FLUSH_MS).unref();
  });
}

/**
 * Runs `onSession` for every HTTP/2 connection the server accepts, bound or injected (LISTEN_FD).
 * grpc-js has no public hook for its connections: this wraps its (private) factory of HTTP/2 servers,
 * and refuses to start when a grpc-js upgrade took it away — the probes in
 * test/e2e/attacks/grpc-hardening.e2e.test.ts fail if it stops being called.
 */
export function onEveryConnection(server: Server, onSession: (session: ServerHttp2Session) => void): void {
  const internals = server as unknown as { createHttp2Server?: (credentials: ServerCredentials) => Http2Server };
  const create = internals.createHttp2Server;
  if (typeof create !== "function")
    throw new Error("this @grpc/grpc-js has no createHttp2Server: the connection policy cannot be enforced");
  internals.createHttp2Server = function (this: Server, credentials: ServerCredentials) {
    const http2Server = create.call(this, credentials);
    http2Server.on("session", onSession);
    return http2Server;
  };
}
