// The gRPC adapter over real HTTP/2 sockets: all four call shapes, errors with ErrorInfo,
// deadlines and cancellation reaching the handler, and wire compatibility with other clients.
import { expect } from "chai";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { Health, HealthCheckResponse_ServingStatus } from "@switchyard/gen/health/v1/health_pb.js";
import { ServerReflection } from "@switchyard/gen/grpc/reflection/v1/reflection_pb.js";
import { ErrorInfoSchema } from "@switchyard/gen/google/rpc/error_details_pb.js";
import type { ServiceImpl } from "@connectrpc/connect";
import { errorInfoOf, fail } from "@switchyard/platform/errors.js";
import { createLogger } from "@switchyard/platform/logger.js";
import { SERVICE_AUTHORIZATION } from "@switchyard/platform/caller.js";
import {
  ANYONE,
  authentication,
  callerOf,
  clientAddressOf,
  createServiceClient,
  openChannel,
  requestMetadataValue,
  serviceCallerOf,
  USERS,
  withoutCallerStack,
  type Authenticator,
} from "@switchyard/platform/grpc";
import { echoImpl, EchoService } from "@switchyard/platform/echo.js";
import { registration, startGrpcServer, type RunningServer } from "@switchyard/platform/server.js";

const run = promisify(execFile);

async function* from<T>(items: T[], gapMs = 0): AsyncIterable<T> {
  for (const item of items) {
    if (gapMs) await sleep(gapMs);
    yield item;
  }
}

describe("gRPC adapter (grpc-js server, protobuf-es messages, Connect-shaped handlers)", () => {
  let server: RunningServer;
  let channel: ReturnType<typeof openChannel>;
  const events: { method: string; aborted: boolean }[] = [];
  let address: string;

  before(async () => {
    server = await startGrpcServer({
      name: "echo",
      host: "127.0.0.1",
      port: 0,
      services: [
        registration(
          EchoService,
          echoImpl((e) => events.push(e)),
        ),
      ],
      logger: createLogger("test", "silent"),
      drainTimeoutMs: 2_000,
      reflection: true,
    });
    address = `127.0.0.1:${server.port}`;
    channel = openChannel(address);
  });
  after(async () => {
    channel.close();
    await server.shutdown();
  });
  beforeEach(() => {
    events.length = 0;
  });

  const echo = () => createServiceClient(EchoService, channel);
  const waitForEvent = async (method: string) => {
    for (let i = 0; i < 100 && !events.some((e) => e.method === method); i++) await sleep(10);
    return events.find((e) => e.method === method);
  };

  it("answers a unary call", async () => {
    const res = await echo().echo({ message: "hello" });
    expect(res.message).to.equal("hello");
  });

  it("carries the error code, message and ErrorInfo reason to the client", async () => {
    const err = await echo()
      .echo({ message: "fail" })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).to.be.instanceOf(ConnectError);
    const ce = err as ConnectError;
    expect(ce.code).to.equal(Code.InvalidArgument);
    expect(ce.rawMessage).to.equal("asked to fail");
    expect(errorInfoOf(ce)?.reason).to.equal("RULE_VIOLATION");
    expect(errorInfoOf(ce)?.metadata).to.deep.equal({ field: "message" });
  });

  it("starts calls without capturing the caller's stack, and leaves the process's stack trace limit as it was", async () => {
    const limit = Error.stackTraceLimit;
    expect(
      withoutCallerStack(() => new Error("inside").stack),
      "no frames captured while a call starts",
    ).to.equal("Error: inside");
    expect(() =>
      withoutCallerStack(() => {
        throw new Error("thrown");
      }),
    ).to.throw("thrown");
    expect(Error.stackTraceLimit, "restored after a start that threw").to.equal(limit);
    // The limit each call starts under, as grpc-js sees it when it makes its caller-stack error.
    const own = openChannel(address);
    const seen: Record<string, number[]> = { unary: [], serverStream: [] };
    const unary = own.makeUnaryRequest.bind(own);
    const serverStream = own.makeServerStreamRequest.bind(own);
    own.makeUnaryRequest = ((...args: Parameters<typeof unary>) => (
      seen.unary!.push(Error.stackTraceLimit),
      unary(...args)
    )) as typeof own.makeUnaryRequest;
    own.makeServerStreamRequest = ((...args: Parameters<typeof serverStream>) => (
      seen.serverStream!.push(Error.stackTraceLimit),
      serverStream(...args)
    )) as typeof own.makeServerStreamRequest;
    const client = createServiceClient(EchoService, own);
    try {
      const ok = await client.echo({ message: "hello" });
      const failed = (await client.echo({ message: "fail" }).catch((e: unknown) => e)) as ConnectError;
      const streamed: number[] = [];
      for await (const m of client.echoStream({ message: "tick", count: 2 })) streamed.push(m.sequence);
      expect([ok.message, failed.code, failed.rawMessage, streamed]).to.deep.equal([
        "hello",
        Code.InvalidArgument,
        "asked to fail",
        [1, 2],
      ]);
    } finally {
      own.close();
    }
    expect(seen).to.deep.equal({ unary: [0, 0], serverStream: [0] });
    expect(Error.stackTraceLimit, "restored after calls that succeeded and failed").to.equal(limit);
    expect(new Error("after").stack?.split("\n").length, "errors made later have their frames").to.be.greaterThan(1);
  });

  it("ends a call at its deadline on both ends", async () => {
    const started = Date.now();
    const err = (await echo()
      .echo({ message: "slow", delayMs: 2_000 }, { timeoutMs: 150 })
      .catch((e: unknown) => e)) as ConnectError;
    expect(err.code).to.equal(Code.DeadlineExceeded);
    expect(Date.now() - started).to.be.lessThan(1_000);
    const event = await waitForEvent("echo");
    expect(event, "the handler saw its signal abort").to.deep.equal({ method: "echo", aborted: true });
  });

  it("propagates a client abort to the handler", async () => {
    const controller = new AbortController();
    const pending = echo()
      .echo({ message: "slow", delayMs: 2_000 }, { signal: controller.signal })
      .catch((e: unknown) => e);
    await sleep(100);
    controller.abort();
    const err = (await pending) as ConnectError;
    expect(err.code).to.equal(Code.Canceled);
    expect(await waitForEvent("echo")).to.deep.equal({ method: "echo", aborted: true });
  });

  it("streams from the server", async () => {
    const got: number[] = [];
    for await (const m of echo().echoStream({ message: "tick", count: 5 })) got.push(m.sequence);
    expect(got).to.deep.equal([1, 2, 3, 4, 5]);
  });

  it("streams from the client", async () => {
    const res = await echo().collect(from([{ message: "a" }, { message: "b" }, { message: "c" }], 5));
    expect(res).to.include({ joined: "a b c", count: 3 });
  });

  it("streams both ways", async () => {
    const got: string[] = [];
    for await (const m of echo().chat(from([{ message: "x" }, { message: "y" }])))
      got.push(`${m.sequence}:${m.message}`);
    expect(got).to.deep.equal(["1:x", "2:y"]);
  });

  it("cancels one stream without disturbing another call on the same connection", async () => {
    const controller = new AbortController();
    const long = (async () => {
      const got: number[] = [];
      try {
        for await (const m of echo().echoStream(
          { message: "long", count: 50, delayMs: 20 },
          { signal: controller.signal },
        ))
          got.push(m.sequence);
      } catch (err) {
        return { got, err: err as ConnectError };
      }
      return { got, err: undefined };
    })();
    const other = (async () => {
      const got: number[] = [];
      for await (const m of echo().echoStream({ message: "other", count: 10, delayMs: 20 })) got.push(m.sequence);
      return got;
    })();
    await sleep(80);
    controller.abort();
    const [cancelled, completed] = await Promise.all([long, other]);
    expect(cancelled.err?.code).to.equal(Code.Canceled);
    expect(cancelled.got.length).to.be.lessThan(50);
    expect(completed).to.have.length(10);
    expect(await waitForEvent("echoStream")).to.deep.equal({ method: "echoStream", aborted: true });
  });

  it("serves grpc.health.v1.Health", async () => {
    const health = createServiceClient(Health, channel);
    expect((await health.check({ service: "" })).status).to.equal(HealthCheckResponse_ServingStatus.SERVING);
    expect((await health.check({ service: "switchyard.echo.v1.EchoService" })).status).to.equal(
      HealthCheckResponse_ServingStatus.SERVING,
    );
    const err = (await health.check({ service: "nope" }).catch((e: unknown) => e)) as ConnectError;
    expect(err.code).to.equal(Code.NotFound);
  });

  it("answers server reflection", async () => {
    const reflection = createServiceClient(ServerReflection, channel);
    const answers = [];
    for await (const res of reflection.serverReflectionInfo(
      from([{ messageRequest: { case: "listServices" as const, value: "" } }]),
    ))
      answers.push(res);
    const listed = answers[0]?.messageResponse;
    expect(listed?.case).to.equal("listServicesResponse");
    const names = listed?.case === "listServicesResponse" ? listed.value.service.map((s) => s.name) : [];
    expect(names).to.include.members([
      "switchyard.echo.v1.EchoService",
      "grpc.health.v1.Health",
      "grpc.reflection.v1.ServerReflection",
    ]);
  });

  describe("wire compatibility with clients other than grpc-js", () => {
    it("is called by connect-node's gRPC transport, ErrorInfo included", async () => {
      const transport = createGrpcTransport({ baseUrl: `http://${address}` });
      const client = createClient(EchoService, transport);
      expect((await client.echo({ message: "via connect" })).message).to.equal("via connect");
      const got: number[] = [];
      for await (const m of client.echoStream({ message: "s", count: 3 })) got.push(m.sequence);
      expect(got).to.deep.equal([1, 2, 3]);
      const err = ConnectError.from(await client.echo({ message: "fail" }).catch((e: unknown) => e));
      expect(err.code).to.equal(Code.InvalidArgument);
      expect(err.findDetails(ErrorInfoSchema)[0]?.reason).to.equal("RULE_VIOLATION");
    });

    it("is called by `buf curl` through server reflection, without local protos", async () => {
      const { stdout } = await run(
        "node_modules/.bin/buf",
        [
          "curl",
          "--protocol",
          "grpc",
          "--http2-prior-knowledge",
          "-d",
          '{"message":"via buf"}',
          `http://${address}/switchyard.echo.v1.EchoService/Echo`,
        ],
        { cwd: new URL("../../..", import.meta.url).pathname },
      );
      expect(JSON.parse(stdout)).to.deep.equal({ message: "via buf" });
    });
  });

  it("drains in-flight calls on shutdown, then refuses new ones", async () => {
    const own = await startGrpcServer({
      name: "drain",
      host: "127.0.0.1",
      port: 0,
      services: [registration(EchoService, echoImpl())],
      logger: createLogger("test", "silent"),
      drainTimeoutMs: 3_000,
    });
    const ch = openChannel(`127.0.0.1:${own.port}`);
    const client = createServiceClient(EchoService, ch);
    await client.echo({ message: "warm" });
    const inFlight = client.echo({ message: "in flight", delayMs: 300 });
    await sleep(50);
    const stopped = own.shutdown();
    expect((await inFlight).message).to.equal("in flight");
    await stopped;
    const err = (await client.echo({ message: "late" }, { timeoutMs: 1_000 }).catch((e: unknown) => e)) as ConnectError;
    expect(err.code).to.equal(Code.Unavailable);
    ch.close();
  });
});

describe("gRPC adapter: authentication before the handler, as each method's policy says", () => {
  let server: RunningServer;
  let channel: ReturnType<typeof openChannel>;
  const handled: { method: string; user?: string; service?: string }[] = [];
  // Verifies "Bearer user-<name>" and "Bearer svc-<name>" (the real verifier is tested on its own).
  const ends = new Map<string, (reason: Error) => void>();
  const watched: string[] = [];
  let authenticated = 0;
  const authenticator: Authenticator = {
    watch(caller, end) {
      watched.push(caller.token);
      ends.set(caller.token, end);
      return () => ends.delete(caller.token);
    },
    // "Bearer known-<name>": a credential verified before, known at once.
    knownCaller(ctx) {
      const token = /^Bearer known-(\w+)$/.exec(requestMetadataValue(ctx, "authorization") ?? "")?.[1];
      return token ? { tenantId: "acme", userId: 2n, role: "member", sessionId: "k", expiresAt: 0, token } : undefined;
    },
    async authenticate(ctx) {
      authenticated++;
      const token = /^Bearer user-(\w+)$/.exec(requestMetadataValue(ctx, "authorization") ?? "")?.[1];
      if (!token) throw fail("UNAUTHENTICATED", "a bearer token is required");
      return { tenantId: "acme", userId: 1n, role: "member", sessionId: "s", expiresAt: 0, token };
    },
    async authenticateService(ctx) {
      const token = /^Bearer svc-(\w+)$/.exec(requestMetadataValue(ctx, SERVICE_AUTHORIZATION) ?? "")?.[1];
      if (!token) throw fail("UNAUTHENTICATED", "an internal service's token is required");
      return { service: token, expiresAt: 0, token };
    },
  };

  before(async () => {
    const impl: ServiceImpl<typeof EchoService> = {
      echo(req, ctx) {
        handled.push({ method: "echo", user: callerOf(ctx).token });
        return { message: req.message };
      },
      async *echoStream(req, ctx) {
        handled.push({ method: "echoStream", user: callerOf(ctx).token });
        for (let sequence = 1; sequence <= req.count; sequence++) {
          yield { message: req.message, sequence };
          if (req.delayMs) await sleep(req.delayMs, undefined, { signal: ctx.signal }).catch(() => {});
          if (ctx.signal.aborted) return;
        }
      },
      async collect(requests, ctx) {
        handled.push({ method: "collect", service: serviceCallerOf(ctx).service });
        let n = 0;
        for await (const _ of requests) n++;
        return { count: n, joined: "" };
      },
      async *chat(requests) {
        handled.push({ method: "chat" });
        for await (const r of requests) yield { message: r.message };
      },
    };
    server = await startGrpcServer({
      name: "auth",
      host: "127.0.0.1",
      port: 0,
      services: [
        registration(EchoService, impl, [
          authentication({
            authenticator,
            access: { echo: USERS, echoStream: USERS, collect: { services: ["orders"] }, chat: ANYONE },
          }),
        ]),
      ],
      logger: createLogger("test", "silent"),
    });
    channel = openChannel(`127.0.0.1:${server.port}`);
  });
  after(async () => {
    channel.close();
    await server.shutdown();
  });
  beforeEach(() => {
    handled.length = 0;
  });

  const client = () => createServiceClient(EchoService, channel);
  const codeOf = (p: Promise<unknown>) =>
    p.then(
      () => undefined,
      (e: unknown) => (e as ConnectError).code,
    );

  it("refuses a user's method without a valid token before the handler runs, and hands the handler the caller", async () => {
    expect(await codeOf(client().echo({ message: "x" }))).to.equal(Code.Unauthenticated);
    expect(await codeOf(client().echo({ message: "x" }, { headers: { authorization: "Bearer svc-orders" } }))).to.equal(
      Code.Unauthenticated,
    );
    expect(handled).to.deep.equal([]);
    expect((await client().echo({ message: "x" }, { headers: { authorization: "Bearer user-bob" } })).message).to.equal(
      "x",
    );
    expect(handled).to.deep.equal([{ method: "echo", user: "bob" }]);
  });

  it("takes a caller the authenticator knows at once, without authenticating again, on a unary call and on a stream (still watched)", async () => {
    const before = authenticated;
    expect(
      (await client().echo({ message: "k" }, { headers: { authorization: "Bearer known-kim" } })).message,
    ).to.equal("k");
    const got: string[] = [];
    for await (const m of client().echoStream(
      { message: "s", count: 1 },
      { headers: { authorization: "Bearer known-kai" } },
    ))
      got.push(m.message);
    expect(got).to.deep.equal(["s"]);
    expect(authenticated, "authenticate was not asked").to.equal(before);
    expect(handled).to.deep.equal([
      { method: "echo", user: "kim" },
      { method: "echoStream", user: "kai" },
    ]);
    expect(watched, "the stream's credential is watched").to.include("kai");
    // An unknown one is still authenticated, and refused when not good.
    expect(await codeOf(client().echo({ message: "x" }, { headers: { authorization: "Bearer known-" } }))).to.equal(
      Code.Unauthenticated,
    );
    expect(authenticated).to.equal(before + 1);
  });

  it("authenticates a stream before its first message", async () => {
    const refused = (async () => {
      for await (const _ of client().echoStream({ message: "x", count: 1 })) expect.fail("no message without a token");
    })();
    expect(await codeOf(refused)).to.equal(Code.Unauthenticated);
    const got: string[] = [];
    for await (const m of client().echoStream(
      { message: "y", count: 1 },
      { headers: { authorization: "Bearer user-amy" } },
    ))
      got.push(m.message);
    expect(got).to.deep.equal(["y"]);
    expect(handled).to.deep.equal([{ method: "echoStream", user: "amy" }]);
  });

  it("ends a live stream with UNAUTHENTICATED when its credential stops being good mid-stream, and stops watching after", async () => {
    const got: number[] = [];
    const streaming = (async () => {
      for await (const m of client().echoStream(
        { message: "tick", count: 1_000, delayMs: 20 },
        { headers: { authorization: "Bearer user-eve" } },
      )) {
        got.push(m.sequence);
        if (m.sequence === 3) ends.get("eve")!(fail("UNAUTHENTICATED", "the token was revoked"));
      }
    })();
    const err = (await streaming.then(
      () => undefined,
      (e: unknown) => e,
    )) as ConnectError;
    expect(err.code).to.equal(Code.Unauthenticated);
    expect(err.rawMessage).to.include("revoked");
    expect(got.length).to.be.within(3, 6);
    for (let i = 0; i < 50 && ends.has("eve"); i++) await sleep(10);
    expect(ends.has("eve"), "the finished stream stopped watching").to.equal(false);
    // A stream that ends on its own ends OK and stops watching too.
    const all: number[] = [];
    for await (const m of client().echoStream(
      { message: "x", count: 2 },
      { headers: { authorization: "Bearer user-finn" } },
    ))
      all.push(m.sequence);
    expect(all).to.deep.equal([1, 2]);
    for (let i = 0; i < 50 && ends.has("finn"); i++) await sleep(10);
    expect(ends.has("finn")).to.equal(false);
  });

  it("lets only an internal service call a service method — a user's token is not enough — and anyone call a public one", async () => {
    expect(
      await codeOf(client().collect(from([{ message: "a" }]), { headers: { authorization: "Bearer user-bob" } })),
    ).to.equal(Code.Unauthenticated);
    expect(
      (
        await client().collect(from([{ message: "a" }, { message: "b" }]), {
          headers: { [SERVICE_AUTHORIZATION]: "Bearer svc-orders" },
        })
      ).count,
    ).to.equal(2);
    // A service the policy does not name, with a valid token of its own: refused before the handler.
    expect(
      await codeOf(
        client().collect(from([{ message: "a" }]), { headers: { [SERVICE_AUTHORIZATION]: "Bearer svc-content" } }),
      ),
    ).to.equal(Code.PermissionDenied);
    const echoed: string[] = [];
    for await (const m of client().chat(from([{ message: "hi" }]))) echoed.push(m.message);
    expect(echoed).to.deep.equal(["hi"]);
    expect(handled).to.deep.equal([{ method: "collect", service: "orders" }, { method: "chat" }]);
  });
});

describe("gRPC adapter: services known by their transport (mutual TLS), checked against the call policy", () => {
  // The transport's word is a test header here (x-test-peer): the certificate's SPIFFE ID in a real
  // server (test/e2e/mtls-rotation.e2e.test.ts checks that one with real certificates).
  let server: RunningServer;
  let channel: ReturnType<typeof openChannel>;
  const handled: { method: string; service?: string | undefined; address?: string }[] = [];
  const authenticator: Authenticator = {
    async authenticate(ctx) {
      const token = /^Bearer user-(\w+)$/.exec(requestMetadataValue(ctx, "authorization") ?? "")?.[1];
      if (!token) throw fail("UNAUTHENTICATED", "a bearer token is required");
      const service = /^Bearer svc-(\w+)$/.exec(requestMetadataValue(ctx, SERVICE_AUTHORIZATION) ?? "")?.[1];
      return {
        tenantId: "acme",
        userId: 1n,
        role: "member",
        sessionId: "s",
        expiresAt: 0,
        token,
        ...(service ? { service } : {}),
      };
    },
    async authenticateService(ctx) {
      const token = /^Bearer svc-(\w+)$/.exec(requestMetadataValue(ctx, SERVICE_AUTHORIZATION) ?? "")?.[1];
      if (!token) throw fail("UNAUTHENTICATED", "an internal service's token is required");
      return { service: token, expiresAt: 0, token };
    },
  };

  before(async () => {
    const impl: ServiceImpl<typeof EchoService> = {
      echo(req, ctx) {
        handled.push({ method: "echo", service: callerOf(ctx).service });
        return { message: req.message };
      },
      async *echoStream() {},
      async collect(requests, ctx) {
        handled.push({ method: "collect", service: serviceCallerOf(ctx).service });
        for await (const _ of requests);
        return { count: 0, joined: "" };
      },
      async *chat(requests, ctx) {
        handled.push({ method: "chat", address: clientAddressOf(ctx) });
        for await (const r of requests) yield { message: r.message };
      },
    };
    server = await startGrpcServer({
      name: "peers",
      host: "127.0.0.1",
      port: 0,
      services: [
        registration(EchoService, impl, [
          authentication({
            authenticator,
            access: {
              echo: { users: true, services: ["orders"] },
              echoStream: USERS,
              collect: { services: ["orders"] },
              chat: ANYONE,
            },
            clientAddressFrom: ["gateway"],
          }),
        ]),
      ],
      logger: createLogger("test", "silent"),
      peerIdentity: (ctx) => requestMetadataValue(ctx, "x-test-peer"),
    });
    channel = openChannel(`127.0.0.1:${server.port}`);
  });
  after(async () => {
    channel.close();
    await server.shutdown();
  });
  beforeEach(() => {
    handled.length = 0;
  });
  const client = () => createServiceClient(EchoService, channel);
  const codeOf = (p: Promise<unknown>) =>
    p.then(
      () => "OK",
      (e: unknown) => Code[(e as ConnectError).code],
    );
  const peer = (name: string, extra: Record<string, string> = {}) => ({ headers: { "x-test-peer": name, ...extra } });

  it("a service-only method: the certificate's service alone is enough; another service is refused; a token must be the certificate's own", async () => {
    const collect = (options: { headers: Record<string, string> }) =>
      codeOf(client().collect(from([{ message: "a" }]), options));
    expect(await collect(peer("orders"))).to.equal("OK");
    expect(await collect(peer("content"))).to.equal("PermissionDenied");
    // orders' token, taken to the content workload: refused, whatever the token says.
    expect(await collect(peer("content", { [SERVICE_AUTHORIZATION]: "Bearer svc-orders" }))).to.equal(
      "Unauthenticated",
    );
    expect(
      await collect({ headers: { [SERVICE_AUTHORIZATION]: "Bearer svc-orders" } }),
      "a token from a workload with no SPIFFE ID",
    ).to.equal("Unauthenticated");
    expect(await collect(peer("orders", { [SERVICE_AUTHORIZATION]: "Bearer svc-orders" }))).to.equal("OK");
    expect(handled).to.deep.equal([
      { method: "collect", service: "orders" },
      { method: "collect", service: "orders" },
    ]);
  });

  it("a user's method some services act on: the user's call carries the certificate's service only when the policy names it", async () => {
    const echo = (options: { headers: Record<string, string> }) => codeOf(client().echo({ message: "x" }, options));
    expect(await echo(peer("orders", { authorization: "Bearer user-bob" }))).to.equal("OK");
    expect(await echo(peer("gateway", { authorization: "Bearer user-bob" }))).to.equal("OK");
    expect(
      await echo(peer("gateway", { authorization: "Bearer user-bob", [SERVICE_AUTHORIZATION]: "Bearer svc-orders" })),
    ).to.equal("Unauthenticated");
    expect(await echo(peer("orders"))).to.equal("Unauthenticated");
    expect(handled).to.deep.equal([
      { method: "echo", service: "orders" },
      { method: "echo", service: undefined },
    ]);
  });

  it("a forwarded client address is taken from the gateway's certificate alone", async () => {
    const chat = async (options: { headers: Record<string, string> }) => {
      for await (const _ of client().chat(from([{ message: "hi" }]), options));
    };
    await chat(peer("gateway", { "x-client-address": "203.0.113.7" }));
    await chat(peer("orders", { "x-client-address": "203.0.113.8" }));
    expect(handled.map((h) => h.address)).to.deep.equal(["203.0.113.7", "127.0.0.1"]);
  });
});

describe("gRPC adapter: a server shutting down", () => {
  it("ends its open streams with UNAVAILABLE at once instead of waiting the drain out, and answers unary calls to the end", async () => {
    const server = await startGrpcServer({
      name: "closing",
      host: "127.0.0.1",
      port: 0,
      services: [registration(EchoService, echoImpl())],
      logger: createLogger("test", "silent"),
      drainTimeoutMs: 10_000,
    });
    const channel = openChannel(`127.0.0.1:${server.port}`);
    try {
      const client = createServiceClient(EchoService, channel);
      let received = 0;
      const streaming = (async () => {
        for await (const _ of client.echoStream({ message: "live", count: 10_000, delayMs: 50 })) received++;
      })().then(
        () => undefined,
        (e: unknown) => e as ConnectError,
      );
      const slow = client.echo({ message: "finishing", delayMs: 300 });
      for (let i = 0; i < 100 && received === 0; i++) await sleep(10);
      const started = Date.now();
      await server.shutdown();
      const err = await streaming;
      expect(err?.code, "the stream was ended for the client to reconnect").to.equal(Code.Unavailable);
      expect((await slow).message, "a unary call in flight still gets its answer").to.equal("finishing");
      expect(Date.now() - started, "no wait for the drain timeout").to.be.below(3_000);
    } finally {
      channel.close();
      await server.shutdown();
    }
  });
});

describe("gRPC adapter: a connection at its age (GRPC_MAX_CONNECTION_AGE_MS)", () => {
  it("a stream cut when its connection's grace runs out ends UNAVAILABLE for the client to reopen, never INTERNAL — also with other calls on the connection", async function () {
    this.timeout(30_000);
    // A short age and a grace shorter than the unary calls in flight: the server destroys the
    // connection under them, as content does every 5 minutes with the gateway's calls on it.
    const server = await startGrpcServer({
      name: "aging",
      host: "127.0.0.1",
      port: 0,
      services: [registration(EchoService, echoImpl())],
      logger: createLogger("test", "silent"),
      maxConnectionAgeMs: 100,
      maxConnectionAgeGraceMs: 30,
    });
    const channel = openChannel(`127.0.0.1:${server.port}`);
    const client = createServiceClient(EchoService, channel);
    let stop = false;
    const unaryEnds: string[] = [];
    const load = (async () => {
      while (!stop)
        await client.echo({ message: "in flight", delayMs: 60 }).catch((e: unknown) => {
          unaryEnds.push(Code[ConnectError.from(e).code]);
        });
    })();
    try {
      const streamEnds: string[] = [];
      for (let i = 0; i < 20; i++) {
        try {
          for await (const _ of client.echoStream({ message: "live", count: 1_000_000, delayMs: 20 }));
          streamEnds.push("ended without an error");
        } catch (e) {
          const err = ConnectError.from(e);
          streamEnds.push(`${Code[err.code]}: ${err.rawMessage}`);
        }
      }
      expect([...new Set(streamEnds)]).to.deep.equal(["Unavailable: Connection dropped"]);
      stop = true;
      await load;
      expect(unaryEnds.filter((c) => c !== "Unavailable")).to.deep.equal([]);
    } finally {
      stop = true;
      channel.close();
      await server.shutdown();
    }
  });
});
