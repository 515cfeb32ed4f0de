// A call's abort signal is made when first asked for: these check that it is then exactly what it
// would have been from the start, and that a call that never asks costs no timer or listener.
import { EventEmitter } from "node:events";
import { expect } from "chai";
import { Metadata } from "@grpc/grpc-js";
import { Code, ConnectError } from "@connectrpc/connect";
import { EchoService } from "../src/echo.js";
import { endCall, openCallContext, type ServerCallLike } from "../src/grpc/handler-context.js";
import { errorInfoOf } from "../src/errors.js";

class FakeCall extends EventEmitter implements ServerCallLike {
  metadata = new Metadata();
  cancelled = false;
  constructor(private readonly deadline: number) {
    super();
  }
  getDeadline() {
    return this.deadline;
  }
  getPath() {
    return "/switchyard.platform.v1.EchoService/Echo";
  }
  cancel() {
    this.cancelled = true;
    this.emit("cancelled", "cancelled");
  }
}

const method = EchoService.methods[0]!;
const open = (call: FakeCall) => {
  const context = openCallContext(call, EchoService, method);
  return { context, done: () => context.done() };
};
const reasonOf = (signal: AbortSignal) => signal.reason as ConnectError;

describe("a call's abort signal, made when first asked for", () => {
  it("a call whose handler never reads it leaves no listener and no timer behind", () => {
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
    const before = timers();
    const call = new FakeCall(Date.now() + 60_000);
    const scope = open(call);
    expect(call.listenerCount("cancelled")).to.equal(0);
    expect(timers()).to.equal(before);
    scope.done();
    expect(call.listenerCount("cancelled")).to.equal(0);
    // Read while running, the same call would hold a deadline timer until it ends.
    const read = open(new FakeCall(Date.now() + 60_000));
    void read.context.signal;
    expect(timers()).to.equal(before + 1);
    read.done();
    expect(timers()).to.equal(before);
  });

  it("read while the call runs: aborted when the client cancels, and its listener removed when the call ends", () => {
    const call = new FakeCall(Infinity);
    const scope = open(call);
    const signal = scope.context.signal;
    expect(signal.aborted).to.equal(false);
    expect(call.listenerCount("cancelled")).to.equal(1);
    call.cancel();
    expect(signal.aborted).to.equal(true);
    expect(reasonOf(signal).code).to.equal(Code.Canceled);
    scope.done();
    expect(call.listenerCount("cancelled")).to.equal(0);
  });

  it("read after the client cancelled: already aborted, as cancelled", () => {
    const call = new FakeCall(Infinity);
    const scope = open(call);
    call.cancel();
    const signal = scope.context.signal;
    expect(signal.aborted).to.equal(true);
    expect(reasonOf(signal).code).to.equal(Code.Canceled);
    scope.done();
  });

  it("read after the deadline passed: already aborted with DEADLINE_EXCEEDED", () => {
    const scope = open(new FakeCall(Date.now() - 1));
    const signal = scope.context.signal;
    expect(signal.aborted).to.equal(true);
    expect(errorInfoOf(reasonOf(signal))?.reason).to.equal("DEADLINE_EXCEEDED");
    scope.done();
  });

  it("read before the deadline: aborted with DEADLINE_EXCEEDED when it passes", async () => {
    const scope = open(new FakeCall(Date.now() + 30));
    const signal = scope.context.signal;
    expect(signal.aborted).to.equal(false);
    await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    expect(errorInfoOf(reasonOf(signal))?.reason).to.equal("DEADLINE_EXCEEDED");
    scope.done();
  });

  it("read after the call ended: already aborted (work it is handed to stops at once)", () => {
    const call = new FakeCall(Infinity);
    const scope = open(call);
    scope.done();
    const signal = scope.context.signal;
    expect(signal.aborted).to.equal(true);
    expect(reasonOf(signal).code).to.equal(Code.Canceled);
    expect(call.listenerCount("cancelled")).to.equal(0);
  });

  it("ended by the server (endCall) before anything read it: the signal carries that reason", () => {
    const scope = open(new FakeCall(Infinity));
    const reason = new ConnectError("the token has expired", Code.Unauthenticated);
    endCall(scope.context, reason);
    expect(scope.context.signal.aborted).to.equal(true);
    expect(scope.context.signal.reason).to.equal(reason);
    scope.done();
    expect(scope.context.signal.reason).to.equal(reason);
  });
});
