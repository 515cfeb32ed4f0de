// Server-Sent Events: writes an event stream with heartbeat comments so idle connections stay
// open through proxies; the stream ends when its source ends or the client goes away.
import type { ServerResponse } from "node:http";
import { toHttpError } from "./errors.js";
import type { ServerSentEvent } from "./route.js";

const RECONNECT_DELAY_MS = 2_000;

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
  const heartbeat = setInterval(() => res.write(": keep-alive\n\n"), heartbeatMs);
  try {
    for await (const event of events) {
      if (signal.aborted) break;
      res.write(frame(event));
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
