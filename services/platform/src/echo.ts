// EchoService: the four call shapes with nothing behind them. Tests use it to prove the gRPC
// adapter; the benchmark serves it as the "bare hop" baseline.
import { setTimeout as sleep } from "node:timers/promises";
import type { ServiceImpl } from "@connectrpc/connect";
import { EchoService } from "@switchyard/gen/switchyard/echo/v1/echo_pb.js";
import { fail } from "./errors.js";

export { EchoService };

async function pause(ms: number, signal: AbortSignal): Promise<void> {
  if (ms > 0) await sleep(ms, undefined, { signal });
}

/** `observe` hears about every call's end, aborted or not (tests assert cancellation with it). */
export function echoImpl(
  observe: (event: { method: string; aborted: boolean }) => void = () => {},
): ServiceImpl<typeof EchoService> {
  const watch = async <T>(method: string, signal: AbortSignal, work: () => Promise<T>): Promise<T> => {
    try {
      return await work();
    } finally {
      observe({ method, aborted: signal.aborted });
    }
  };
  return {
    echo(req, ctx) {
      if (req.message === "fail") throw fail("RULE_VIOLATION", "asked to fail", { field: "message" });
      if (req.delayMs === 0) return { message: req.message };
      return watch("echo", ctx.signal, async () => {
        await pause(req.delayMs, ctx.signal);
        return { message: req.message };
      });
    },
    async *echoStream(req, ctx) {
      try {
        for (let sequence = 1; sequence <= req.count; sequence++) {
          await pause(req.delayMs, ctx.signal);
          yield { message: req.message, sequence };
        }
      } finally {
        observe({ method: "echoStream", aborted: ctx.signal.aborted });
      }
    },
    async collect(requests, ctx) {
      return watch("collect", ctx.signal, async () => {
        const parts: string[] = [];
        for await (const r of requests) parts.push(r.message);
        return { joined: parts.join(" "), count: parts.length };
      });
    },
    async *chat(requests, ctx) {
      let sequence = 0;
      try {
        for await (const r of requests) {
          await pause(r.delayMs, ctx.signal);
          yield { message: r.message, sequence: ++sequence };
        }
      } finally {
        observe({ method: "chat", aborted: ctx.signal.aborted });
      }
    },
  };
}
