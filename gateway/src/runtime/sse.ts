// Server-Sent Events: writes an event stream with heartbeat comments so idle connections stay
// open through proxies; the stream ends when its source ends or the client goes away. A reader that
// falls more than MAX_BUFFERED_BYTES behind is disconnected: the gateway never holds more than that
// for one slow client (it reconnects with Last-Event-ID and catches up).
import type { ServerResponse } from "node:http";
import { toHttpError } from "./errors.js";
import type { ServerSentEvent } from "./route.js";

const RECONNECT_DELAY_MS = 2_000;
export const MAX_BUFFERED_BYTES = 1024 * 1024;

function frame(event: ServerSentEvent): string {
  const lines: string[] = [];
  if (event.id !== undefined) lines.push(`id: ${event.id}`);
  if (event.event !== undefined) lines.push(`event: ${event.event}`);
  // JSON has no raw newlines, so one data line always suffices.
  lines.push(`data: ${JSON.stringify(event.data)}`);
  return `${lines.join("\n")}\n\n`;
}

export async function writeEventStream(res: ServerResponse, events: AsyncIterable<ServerSentEvent>, heartbeatMs: number, signal: AbortSignal, headers: Record<string, string> = {}): Promise<void> {
  res.writeHead(200, {
    ...headers,
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache, no-transform",
    connection: "keep-alive",
    "x-accel-buffering": "no",
  });
  res.write(`retry: ${RECONNECT_DELAY_MS}\n\n`);
  // Only a reader keeping up needs keeping alive; one that is behind has bytes waiting anyway.
  const heartbeat = setInterval(() => res.writableNeedDrain || res.write(": keep-alive\n\n"), heartbeatMs);
  try {
    for await (const event of events) {
      if (signal.aborted) break;
      if (!res.write(frame(event)) && res.writableLength > MAX_BUFFERED_BYTES) {
        res.destroy();
        break;
      }
    }
  } catch (err) {
    // The stream broke after it began: say why in-band, then close. An upstream that went away: the
    // client reconnects with Last-Event-ID; a token that expired or was revoked: it logs in first.
    if (!signal.aborted) {
      const failure = toHttpError(err);
      res.write(
        frame(
          failure.status === 401
            ? { event: "error", data: { error: `the live feed ended: ${failure.message}`, code: failure.code } }
            : { event: "error", data: { error: "the live feed was interrupted; reconnect", code: "UPSTREAM_UNAVAILABLE" } },
        ),
      );
    }
  } finally {
    clearInterval(heartbeat);
    res.end();
  }
}
