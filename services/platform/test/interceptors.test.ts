// The services' interceptor chain, step by step: how the chain is composed (once per method, in its
// order, skipping a step a method has none of), and what each step does to a call — with a call's real
// context (grpc-js' side faked), then a domain rule's refusal over the wire.
import { EventEmitter } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import { expect } from "chai";
import { Metadata } from "@grpc/grpc-js";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type { DescMethod } from "@bufbuild/protobuf";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { OrderService } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { passedOn, remainingMs } from "../src/call-deadline.js";
import { downstreamOptions } from "../src/auth.js";
import type { Caller } from "../src/caller.js";
import { DomainError } from "../src/domain-error.js";
import { EchoService } from "../src/echo.js";
import { errorInfoOf, fail } from "../src/errors.js";
import { createLogger } from "../src/logger.js";
import { registration, startGrpcServer } from "../src/server.js";
import { createServiceClient, openChannel } from "../src/grpc/client.js";
import {
  callScopeOf,
  endCall,
  openCallContext,
  priorityOf,
  requestIdOf,
  type ServerCallLike,
} from "../src/grpc/handler-context.js";
import { PRIORITY_HEADER } from "../src/priority.js";
import {
  composeChain,
  type CallHandler,
  type ServerCall,
  type ServiceInterceptor,
} from "../src/grpc/interceptors/chain.js";
import { admission, deadline, domainErrors } from "../src/grpc/interceptors/index.js";
import { idempotencyKeys, telemetry } from "../src/grpc/interceptors/index.js";

class FakeCall extends EventEmitter implements ServerCallLike {
  metadata = new Metadata();
  constructor(private readonly deadline: number = Infinity) {
    super();
  }
  getDeadline() {
    return this.deadline;
  }
  getPath() {
    return "/fake";
  }
}

const unary = EchoService.method.echo;
const stream = EchoService.method.echoStream;
const callOf = (method: DescMethod, message: unknown = {}, fake = new FakeCall()): ServerCall => ({
  message,
  context: openCallContext(fake, method.parent, method),
});
const chainOf = (method: DescMethod, interceptors: ServiceInterceptor[], handler: CallHandler) =>
  composeChain(method, interceptors, {}, handler);
const KEY_INVALID = { code: "InvalidArgument", reason: "IDEMPOTENCY_KEY_INVALID" };
/** What a chain does, its synchronous throws included: its answer, or what it failed with. */
const settled = (run: () => unknown) =>
  Promise.resolve()
    .then(run)
    .catch((e: unknown) => e);
/** What a step did: its answer, or its error's gRPC code and ErrorInfo reason. */
async function outcome(run: () => unknown): Promise<unknown> {
  try {
    return await run();
  } catch (err) {
    return err instanceof ConnectError ? { code: Code[err.code], reason: errorInfoOf(err)?.reason } : err;
  }
}
const KEY = "0b6f6b4e-8d55-4b0b-9a59-2b8f1a4c7f10";

describe("interceptor chain: composed once per method", () => {
  it("runs its steps outermost first, each made once per method, and leaves out a step a method has none of", async () => {
    const made: string[] = [];
    const ran: string[] = [];
    const step =
      (name: string, only?: DescMethod): ServiceInterceptor =>
      (method) => {
        if (only && method !== only) return undefined;
        made.push(`${name}:${method.name}`);
        return (next) => (call) => {
          ran.push(name);
          return next(call);
        };
      };
    const interceptors = [step("outer"), step("keys", stream), step("inner")];
    const chain = chainOf(unary, interceptors, () => "answer");
    expect(made).to.deep.equal(["inner:Echo", "outer:Echo"]);
    expect(await chain(callOf(unary)), "and again").to.equal("answer");
    await chain(callOf(unary));
    expect(ran).to.deep.equal(["outer", "inner", "outer", "inner"]);
    expect(made, "nothing is made per call").to.have.length(2);
  });
});

describe("interceptor: the Idempotency-Key rules", () => {
  const create = PaymentService.method.createPayment;
  const rules = idempotencyKeys<typeof PaymentService>({ createPayment: "required", createRefund: "required" });

  it("refuses a key that is not a UUID before the handler runs, and lets a good one through", async () => {
    let handled = 0;
    const chain = chainOf(create, [domainErrors, rules], () => ++handled);
    for (const key of ["", "not-a-uuid", `${KEY}0`, ` ${KEY}`]) {
      const refused = await outcome(() => chain(callOf(create, { idempotencyKey: key })));
      expect(refused, JSON.stringify(key)).to.deep.equal(KEY_INVALID);
    }
    expect(handled).to.equal(0);
    expect(await chain(callOf(create, { idempotencyKey: KEY }))).to.equal(1);
    expect(await chain(callOf(create, { idempotencyKey: KEY.toUpperCase() }))).to.equal(2);
  });

  it("an optional key may be left out, but one sent must be good", async () => {
    const createOrder = OrderService.method.createOrder;
    const rules = idempotencyKeys<typeof OrderService>({ createOrder: "optional" });
    const chain = chainOf(createOrder, [domainErrors, rules], () => "made");
    expect(await chain(callOf(createOrder, { idempotencyKey: "" }))).to.equal("made");
    expect(await chain(callOf(createOrder, { idempotencyKey: KEY }))).to.equal("made");
    expect(await outcome(() => chain(callOf(createOrder, { idempotencyKey: "nope" })))).to.deep.equal(KEY_INVALID);
  });

  it("a method the rules do not name gets no step; a rule on a method without a key of its own fails at start", () => {
    expect(rules(PaymentService.method.getPayment, {})).to.equal(undefined);
    const misplaced = idempotencyKeys<typeof PaymentService>({ getPayment: "required" });
    expect(() => misplaced(PaymentService.method.getPayment, {})).to.throw(/takes no idempotency_key/);
  });
});

describe("interceptor: domain errors → gRPC status, at the handler", () => {
  const chain = (handler: CallHandler) => chainOf(unary, [domainErrors], handler);
  const details = { sku: "BOOK-1", unit_price: "1500", currency: "EUR" };
  const refusal = new DomainError("PRICE_CHANGED", "the price of BOOK-1 is 1500 EUR", details);

  it("turns a rule's refusal, thrown at once or later, into the catalogue's code with an ErrorInfo of its reason and details", async () => {
    for (const handler of [
      () => {
        throw refusal;
      },
      async () => {
        await sleep(1);
        throw refusal;
      },
    ]) {
      const err = await settled(() => chain(handler)(callOf(unary)));
      expect(err).to.be.instanceOf(ConnectError);
      const ce = err as ConnectError;
      expect(ce.code).to.equal(Code.FailedPrecondition);
      expect(ce.rawMessage).to.equal("the price of BOOK-1 is 1500 EUR");
      expect(errorInfoOf(ce)?.reason).to.equal("PRICE_CHANGED");
      expect(errorInfoOf(ce)?.metadata).to.deep.equal(details);
    }
  });

  it("leaves a status error, any other error and an answer as they are", async () => {
    const status = fail("NOT_FOUND", "payment not found");
    const bug = new TypeError("x is undefined");
    expect(await settled(() => chain(() => Promise.reject(status))(callOf(unary)))).to.equal(status);
    expect(await settled(() => chain(() => Promise.reject(bug))(callOf(unary)))).to.equal(bug);
    expect(chain(() => "sync answer")(callOf(unary))).to.equal("sync answer");
  });
});

describe("interceptor: admission (load shedding)", () => {
  it("refuses before anything else runs while the guard says so", async () => {
    let shedding = true;
    let handled = 0;
    const guard = {
      admit: () => {
        if (shedding) throw fail("LOAD_SHED", "overloaded");
      },
    };
    const chain = chainOf(unary, [admission(guard)], () => ++handled);
    expect(await outcome(() => chain(callOf(unary)))).to.deep.equal({ code: "Unavailable", reason: "LOAD_SHED" });
    expect(handled).to.equal(0);
    shedding = false;
    expect(await chain(callOf(unary))).to.equal(1);
  });
});

describe("the call's scope (deadline, request id, priority)", () => {
  it("is the call's deadline and request id — the caller's, when well formed — and what it passes on", () => {
    const fake = new FakeCall(Date.now() + 5_000);
    fake.metadata.set("x-request-id", "req-from-the-gateway");
    fake.metadata.set(PRIORITY_HEADER, "sheddable");
    const scope = callScopeOf(callOf(unary, {}, fake).context);
    expect(remainingMs(scope)).to.be.within(4_000, 5_000);
    expect(scope.requestId).to.equal("req-from-the-gateway");
    expect(passedOn(scope)).to.deep.equal({ "x-request-id": "req-from-the-gateway", [PRIORITY_HEADER]: "sheddable" });
    const made = callScopeOf(callOf(unary).context);
    expect(made.requestId, "none sent: one is made").to.match(/^[0-9a-f-]{36}$/);
    expect(remainingMs(made), "no deadline sent").to.equal(undefined);
    expect(passedOn(made), "default is not sent").to.deep.equal({ "x-request-id": made.requestId });
  });
});

describe("the call's scope — passed on with the caller's credential (downstreamOptions)", () => {
  it("a service's calls onward carry the priority and request id its caller sent; none sent is default", async () => {
    const logger = createLogger("test", "silent");
    const seenAtBack: string[] = [];
    const idsAtBack: string[] = [];
    const user: Caller = { tenantId: "acme", userId: 1n, role: "member", sessionId: "s", expiresAt: 0, token: "t" };
    const back = await startGrpcServer({
      name: "back",
      host: "127.0.0.1",
      port: 0,
      logger,
      services: [
        registration(EchoService, {
          echo(_req, ctx) {
            seenAtBack.push(priorityOf(ctx));
            idsAtBack.push(requestIdOf(ctx));
            return { message: "ok" };
          },
        } as Partial<ServiceImpl<typeof EchoService>> as ServiceImpl<typeof EchoService>),
      ],
    });
    const backChannel = openChannel(`127.0.0.1:${back.port}`);
    const backEcho = createServiceClient(EchoService, backChannel);
    const front = await startGrpcServer({
      name: "front",
      host: "127.0.0.1",
      port: 0,
      logger,
      services: [
        registration(EchoService, {
          async echo(_req, ctx) {
            // What the services' own calls onward use (orders → payments, orders → content).
            await backEcho.echo({ message: "onward" }, { ...downstreamOptions(user, ctx), timeoutMs: 2_000 });
            return { message: priorityOf(ctx) };
          },
        } as Partial<ServiceImpl<typeof EchoService>> as ServiceImpl<typeof EchoService>),
      ],
    });
    const channel = openChannel(`127.0.0.1:${front.port}`);
    try {
      const echo = createServiceClient(EchoService, channel);
      const at = async (headers: Record<string, string>) => (await echo.echo({ message: "x" }, { headers })).message;
      expect(await at({ [PRIORITY_HEADER]: "sheddable", "x-request-id": "req-from-the-gateway" })).to.equal(
        "sheddable",
      );
      expect(idsAtBack, "the caller's request id, passed on").to.deep.equal(["req-from-the-gateway"]);
      expect(await at({ [PRIORITY_HEADER]: "critical" })).to.equal("critical");
      expect(await at({})).to.equal("default");
      expect(await at({ [PRIORITY_HEADER]: "urgent!" }), "an unknown one").to.equal("default");
      expect(seenAtBack).to.deep.equal(["sheddable", "critical", "default", "default"]);
    } finally {
      channel.close();
      backChannel.close();
      await front.shutdown();
      await back.shutdown();
    }
  });
});

describe("interceptor: deadline", () => {
  it("ends a call that answers once at the server's own deadline, and aborts its work", async () => {
    const context = openCallContext(new FakeCall(), EchoService, unary, { defaultMs: 30, maxMs: 1_000 });
    const started = Date.now();
    let aborted = false;
    const result = await outcome(() =>
      chainOf(unary, [deadline], async (call) => {
        call.context.signal.addEventListener("abort", () => (aborted = true));
        await sleep(200);
        return "too late";
      })({ message: {}, context }),
    );
    expect(result).to.deep.equal({ code: "DeadlineExceeded", reason: "DEADLINE_EXCEEDED" });
    expect(Date.now() - started).to.be.below(190);
    await sleep(5);
    expect(aborted).to.equal(true);
  });

  it("a stream the server ended ends with that reason, whatever its handler did on the way out", async () => {
    const call = callOf(stream);
    const gone = fail("UNAUTHENTICATED", "the session was revoked");
    const ended = chainOf(stream, [deadline], async () => {
      endCall(call.context, gone);
      throw new Error("the handler's own error on the way out");
    });
    expect(await settled(() => ended(call))).to.equal(gone);
    const quiet = callOf(stream);
    const returned = chainOf(stream, [deadline], () => {
      endCall(quiet.context, gone);
      return undefined;
    });
    expect(await settled(() => returned(quiet)), "not OK").to.equal(gone);
  });

  it("a stream whose handler returned once its deadline passed was cut: DEADLINE_EXCEEDED, not OK", async () => {
    const call = callOf(stream, {}, new FakeCall(Date.now() + 20));
    const chain = chainOf(stream, [deadline], () => sleep(40));
    expect(await outcome(() => chain(call))).to.deep.equal({ code: "DeadlineExceeded", reason: "DEADLINE_EXCEEDED" });
    expect(await chainOf(stream, [deadline], () => "done")(callOf(stream)), "in time: over, OK").to.equal(undefined);
  });
});

describe("interceptor: telemetry", () => {
  it("tells the observer of every failure and of a unary call's answer", async () => {
    const failed: unknown[] = [];
    const answered: string[] = [];
    const observer = {
      failed: (err: unknown) => failed.push(err),
      answered: (method: DescMethod) => answered.push(method.name),
    };
    const refusal = fail("NOT_FOUND", "gone");
    expect(await chainOf(unary, [telemetry(observer)], async () => "ok")(callOf(unary))).to.equal("ok");
    const failing = chainOf(unary, [telemetry(observer)], () => Promise.reject(refusal));
    expect(await outcome(() => failing(callOf(unary)))).to.deep.equal({ code: "NotFound", reason: "NOT_FOUND" });
    expect(answered).to.deep.equal(["Echo"]);
    expect(failed).to.deep.equal([refusal]);
  });
});

describe("a domain rule's refusal over the wire", () => {
  it("reaches the client as the catalogue's code, message and ErrorInfo, from a unary call and mid-stream", async () => {
    const impl: ServiceImpl<typeof EchoService> = {
      echo() {
        throw new DomainError("RULE_VIOLATION", "message must be short", { field: "message" });
      },
      async *echoStream() {
        yield { message: "first", sequence: 1 };
        throw new DomainError("INVALID_STATE", "the stream's subject is gone", { current_status: "cancelled" });
      },
      async collect() {
        return { count: 0, joined: "" };
      },
      async *chat() {},
    };
    const logger = createLogger("test", "silent");
    const server = await startGrpcServer({
      name: "domain",
      host: "127.0.0.1",
      port: 0,
      services: [registration(EchoService, impl)],
      logger,
    });
    const channel = openChannel(`127.0.0.1:${server.port}`);
    try {
      const client = createServiceClient(EchoService, channel);
      const err = (await client.echo({ message: "x" }).catch((e: unknown) => e)) as ConnectError;
      const info = errorInfoOf(err);
      expect([err.code, err.rawMessage, info?.reason, info?.metadata]).to.deep.equal([
        Code.InvalidArgument,
        "message must be short",
        "RULE_VIOLATION",
        { field: "message" },
      ]);
      const received: string[] = [];
      const streamErr = await (async () => {
        for await (const m of client.echoStream({ message: "x", count: 3 })) received.push(m.message);
      })().catch((e: unknown) => e as ConnectError);
      expect(received).to.deep.equal(["first"]);
      const streamInfo = errorInfoOf(streamErr!);
      expect([streamErr?.code, streamInfo?.reason, streamInfo?.metadata]).to.deep.equal([
        Code.FailedPrecondition,
        "INVALID_STATE",
        { current_status: "cancelled" },
      ]);
    } finally {
      channel.close();
      await server.shutdown();
    }
  });
});
