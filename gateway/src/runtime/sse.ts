// Server-Sent Events: writes an event stream with heartbeat comments so idle connections stay
// open through proxies — also while an upstream stream is being reopened; the stream ends when its
// source ends, the client goes away or the caller's token stops being good (expired or revoked: said
// in-band, then closed). An in-band ending repeats the last event id and the reconnection time, so an
// EventSource reconnects with Last-Event-ID and misses nothing. A reader that
// falls more than MAX_BUFFERED_BYTES behind is disconnected: the gateway never holds more than that
// for one slow client (it reconnects with Last-Event-ID and catches up).
import type { ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { toHttpError } from "./errors.js";

/** One event of a text/event-stream answer (a route's `events`, a live feed's tail). */
export interface ServerSentEvent {
  id?: string;
  event?: string;
  /** The reconnection time the client should use from now on (ms). */
  retry?: number;
  data: unknown;
  /** The event on the wire, filled when it is first written (below): an event shared by many streams is framed once. */
  frame?: Buffer;
}

const RECONNECT_DELAY_MS = 2_000;
export const MAX_BUFFERED_BYTES = 1024 * 1024;

function format(event: ServerSentEvent): string {
  const lines: string[] = [];
  if (event.id !== undefined) lines.push(`id: ${event.id}`);
  if (event.retry !== undefined) lines.push(`retry: ${event.retry}`);
  if (event.event !== undefined) lines.push(`event: ${event.event}`);
  // JSON has no raw newlines, so one data line always suffices.
  lines.push(`data: ${JSON.stringify(event.data)}`);
  return `${lines.join("\n")}\n\n`;
}

/** The event's bytes, formatted once however many streams write it. */
function frame(event: ServerSentEvent): Buffer {
  return (event.frame ??= Buffer.from(format(event)));
}

export interface EventStreamOptions {
  heartbeatMs: number;
  /** Aborted when the client goes away (or cancel is called). */
  signal: AbortSignal;
  /** Stops the stream's upstream work, which ends its source. */
  cancel(): void;
  headers?: Record<string, string>;
  /** Calls `end` once the caller's token stops being good; returns the way to stop watching. */
  watchCredential?: (end: (reason: unknown) => void) => () => void;
  /** The position the stream starts after: the id an in-band ending gives when no event was written. */
  lastEventId?: string | undefined;
}

/**
 * Writes `events` as they are pulled, then, with `follow`, the events pushed to the writer it is
 * given (a shared stream writes each event to all of its subscribers at once, without a promise each).
 */
export async function writeEventStream(
  res: ServerResponse,
  events: AsyncIterable<ServerSentEvent>,
  follow: ((writer: (event: ServerSentEvent) => boolean) => Promise<void>) | undefined,
  options: EventStreamOptions,
): Promise<void> {
  const { signal } = options;
  // The body ends when the connection does (RFC 9112 §6.3), not with a zero-length chunk: a live
  // stream is the connection's last response anyway, and without chunk framing an event shared by
  // thousands of streams is one buffer written as it is to each socket.
  res.removeHeader("transfer-encoding");
  res.writeHead(200, {
    ...options.headers,
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache, no-transform",
    connection: "close",
    "x-accel-buffering": "no",
  });
  // HEAD: the stream's headers and no body (RFC 9110 §9.3.2), so nothing to follow.
  if (res.req.method === "HEAD") {
    options.cancel();
    res.end();
    return;
  }
  res.write(`retry: ${RECONNECT_DELAY_MS}\n\n`);
  // The body's bytes go to the socket itself — the same bytes (the headers are out, the body has no
  // framing) without ServerResponse#write's cork and next-tick uncork per call, a quarter of the
  // gateway's CPU per delivery at 10,000 subscribers. They queue behind the headers in order. A
  // response still waiting for its socket (pipelined behind another) writes through itself.
  const sink: Socket | ServerResponse = res.socket ?? res;
  // A socket stops being writable once the client closed its side (the server then ends ours).
  const closed = () => sink.destroyed || !sink.writable;
  // Only a reader keeping up needs keeping alive; one that is behind has bytes waiting anyway.
  const heartbeat = setInterval(
    () => sink.writableNeedDrain || closed() || sink.write(": keep-alive\n\n"),
    options.heartbeatMs,
  );
  // A stream lasts no longer than the token it was opened with.
  let credentialEnded: unknown;
  const unwatch = options.watchCredential?.((reason) => {
    credentialEnded = reason;
    options.cancel();
  });
  let failure: unknown;
  let lastEventId = options.lastEventId ?? "";
  /** Writes one event; false once the client is gone, or so far behind that it was disconnected. */
  const write = (event: ServerSentEvent): boolean => {
    if (signal.aborted || closed()) return false;
    if (event.id !== undefined) lastEventId = event.id;
    if (!sink.write(frame(event)) && sink.writableLength > MAX_BUFFERED_BYTES) {
      res.destroy();
      return false;
    }
    return true;
  };
  try {
    let writing = true;
    for await (const event of events) {
      writing = write(event);
      if (!writing) break;
    }
    if (writing && follow) await follow(write);
  } catch (err) {
    failure = err;
  } finally {
    clearInterval(heartbeat);
    unwatch?.();
  }
  // The stream broke after it began: say why in-band, then close. An upstream that went away (for
  // longer than the gateway rides out): the client reconnects with Last-Event-ID — repeated here, with
  // the reconnection time; a token that expired or was revoked: it logs in first.
  const reason = credentialEnded ?? (signal.aborted ? undefined : failure);
  if (reason !== undefined && !res.destroyed) {
    const problem = toHttpError(reason);
    res.write(
      frame({
        ...(lastEventId !== "" ? { id: lastEventId } : {}),
        retry: RECONNECT_DELAY_MS,
        event: "error",
        data:
          problem.status === 401
            ? { error: `the live feed ended: ${problem.message}`, code: problem.code }
            : { error: "the live feed was interrupted; reconnect", code: "UPSTREAM_UNAVAILABLE" },
      }),
    );
  }
  res.end();
}
