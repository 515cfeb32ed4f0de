// A request's cancellation at the edge (runtime/cancellation.ts): the light signal a unary upstream
// call gets, the real AbortSignal made only when asked for, and a real gRPC call cancelled through it.
import { expect } from "chai";
import { Code, ConnectError } from "@connectrpc/connect";
import { createLogger } from "@switchyard/platform/logger.js";
import { createServiceClient, openChannel } from "@switchyard/platform/grpc";
import { echoImpl, EchoService } from "@switchyard/platform/echo.js";
import { registration, startGrpcServer, type RunningServer } from "@switchyard/platform/server.js";
import { RequestCancellation } from "../src/runtime/cancellation.js";

describe("request cancellation (edge)", () => {
  it("runs each abort listener once, with an abort event, and not one that was removed", () => {
    const cancel = new RequestCancellation();
    const seen: string[] = [];
    const a = (e: Event) => seen.push(`a:${e.type}`);
    const b = (e: Event) => seen.push(`b:${e.type}`);
    const c = () => seen.push("c");
    cancel.addEventListener("abort", a);
    cancel.addEventListener("abort", b);
    cancel.addEventListener("abort", c);
    cancel.removeEventListener("abort", b);
    cancel.addEventListener("close", () => seen.push("not an abort"));
    expect(cancel.aborted).to.equal(false);
    cancel.abort();
    cancel.abort();
    expect(seen).to.deep.equal(["a:abort", "c"]);
    expect(cancel.aborted).to.equal(true);
    expect(cancel.reason).to.be.instanceOf(DOMException).and.have.property("name", "AbortError");
  });

  it("runs every listener and aborts a real signal made earlier even when one listener throws; the error is reported, not swallowed", async () => {
    const cancel = new RequestCancellation();
    const signal = cancel.signal;
    const ran: string[] = [];
    cancel.addEventListener("abort", () => {
      ran.push("first");
      throw new Error("listener failed");
    });
    cancel.addEventListener("abort", () => ran.push("second"));
    const reported: unknown[] = [];
    const mochaHandlers = process.listeners("uncaughtException");
    process.removeAllListeners("uncaughtException");
    process.on("uncaughtException", (err) => reported.push(err));
    try {
      cancel.abort();
      await new Promise((r) => setImmediate(r));
    } finally {
      process.removeAllListeners("uncaughtException");
      for (const h of mochaHandlers) process.on("uncaughtException", h);
    }
    expect(ran).to.deep.equal(["first", "second"]);
    expect(signal.aborted).to.equal(true);
    expect(reported).to.have.length(1);
    expect((reported[0] as Error).message).to.equal("listener failed");
  });

  it("keeps the reason it was aborted with", () => {
    const cancel = new RequestCancellation();
    const reason = new Error("client gone");
    cancel.abort(reason);
    expect(cancel.reason).to.equal(reason);
    expect(cancel.callSignal.reason).to.equal(reason);
    expect(cancel.callSignal.aborted).to.equal(true);
  });

  it("makes a real AbortSignal only when asked, aborting with the request — before or after it was made", () => {
    const early = new RequestCancellation();
    const signal = early.signal;
    expect(signal).to.be.instanceOf(AbortSignal);
    expect(early.signal).to.equal(signal);
    expect(signal.aborted).to.equal(false);
    const reason = new Error("stream over");
    early.abort(reason);
    expect(signal.aborted).to.equal(true);
    expect(signal.reason).to.equal(reason);

    const late = new RequestCancellation();
    late.abort(reason);
    expect(late.signal.aborted).to.equal(true);
    expect(late.signal.reason).to.equal(reason);
  });

  it("tells no listener that was removed, the last one included (a finished call is not cancelled)", () => {
    const cancel = new RequestCancellation();
    let calls = 0;
    const one = () => calls++;
    const two = () => calls++;
    cancel.addEventListener("abort", one);
    cancel.addEventListener("abort", two);
    cancel.removeEventListener("abort", one);
    cancel.removeEventListener("abort", two);
    cancel.abort();
    expect(calls).to.equal(0);
  });

  describe("through the platform client, over a real gRPC call", () => {
    let server: RunningServer;
    let channel: ReturnType<typeof openChannel>;
    before(async () => {
      server = await startGrpcServer({
        name: "echo",
        host: "127.0.0.1",
        port: 0,
        services: [registration(EchoService, echoImpl())],
        logger: createLogger("test", "silent"),
        drainTimeoutMs: 1_000,
      });
      channel = openChannel(`127.0.0.1:${server.port}`);
    });
    after(async () => {
      channel.close();
      await server.shutdown();
    });

    it("cancels a unary call in flight when the request is cancelled", async () => {
      const echo = createServiceClient(EchoService, channel);
      const cancel = new RequestCancellation();
      const started = Date.now();
      const call = echo.echo({ message: "slow", delayMs: 5_000 }, { signal: cancel.callSignal, timeoutMs: 10_000 });
      setTimeout(() => cancel.abort(), 50);
      const err = await call.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(ConnectError);
      expect((err as ConnectError).code).to.equal(Code.Canceled);
      expect(Date.now() - started).to.be.below(2_000);
    });

    it("refuses to start a call for a request already cancelled, and leaves a finished call's answer alone", async () => {
      const echo = createServiceClient(EchoService, channel);
      const done = new RequestCancellation();
      expect(await echo.echo({ message: "quick", delayMs: 0 }, { signal: done.callSignal })).to.have.property(
        "message",
        "quick",
      );
      done.abort(); // after the answer: nothing to cancel, nothing thrown

      const gone = new RequestCancellation();
      gone.abort();
      const err = await echo.echo({ message: "never", delayMs: 0 }, { signal: gone.callSignal }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((err as ConnectError).code).to.equal(Code.Canceled);
    });
  });
});
