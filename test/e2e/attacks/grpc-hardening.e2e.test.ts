// Probes of the services' gRPC ports from outside their processes, as anything on the network could
// send them, with real clients (grpc-js channels, and node:http2 where the probe is a frame a gRPC
// library does not let its user send): reflection answers only where it is turned on; a client that
// pings every 10 ms is told GOAWAY ENHANCE_YOUR_CALM ("too_many_pings") and one that pings politely is
// not; a connection runs at most GRPC_MAX_CONCURRENT_STREAMS calls at once (the next one waits); a
// call that answers once runs no longer than the server's ceiling, gets a default deadline when it
// sends none, while a stream is exempt; and a message over 4 MiB is refused.
import { expect } from "chai";
import { connect, constants, type ClientHttp2Session } from "node:http2";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { ServerReflection } from "@switchyard/gen/grpc/reflection/v1/reflection_pb.js";
import { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { createServiceClient, openChannel } from "@switchyard/platform/grpc";
import { MAX_MESSAGE_BYTES } from "@switchyard/platform/message-limits.js";
import { ALICE, newKey, startE2eMesh, type E2eMesh } from "../../support/http.js";

/** The streams content lets one connection have open at once in this mesh. */
const CONTENT_STREAMS = 4;
/** Content's ping interval here: short, so a polite client can be shown within seconds. */
const CONTENT_PING_INTERVAL_MS = 300;
/** Payments' ceiling and default deadline here, and how long a charge stalls (FAULTS) — longer than both. */
const PAYMENTS_MAX_DEADLINE_MS = 1_000;
const PAYMENTS_DEFAULT_DEADLINE_MS = 500;
const CHARGE_STALL_MS = 4_000;

async function* once<T>(item: T): AsyncIterable<T> {
  yield item;
}

/** The services a server lists over reflection, or the code it refused with. */
async function reflectedServices(port: number): Promise<string[] | Code> {
  const channel = openChannel(`127.0.0.1:${port}`);
  try {
    const reflection = createServiceClient(ServerReflection, channel);
    const names: string[] = [];
    for await (const res of reflection.serverReflectionInfo(
      once({ messageRequest: { case: "listServices" as const, value: "" } }),
      { timeoutMs: 5_000 },
    )) {
      if (res.messageResponse.case === "listServicesResponse")
        names.push(...res.messageResponse.value.service.map((s) => s.name));
    }
    return names;
  } catch (err) {
    return ConnectError.from(err).code;
  } finally {
    channel.close();
  }
}

/** An HTTP/2 connection to a gRPC port, with what it was told: GOAWAY (code and debug data), and when it closed. */
async function rawConnection(port: number): Promise<{
  session: ClientHttp2Session;
  goaway: () => { code: number; data: string } | undefined;
  closed: () => boolean;
}> {
  const session = connect(`http://127.0.0.1:${port}`);
  let goaway: { code: number; data: string } | undefined;
  let closed = false;
  session.on("goaway", (code, _last, data) => (goaway = { code, data: data?.toString() ?? "" }));
  session.on("error", () => {});
  session.on("close", () => (closed = true));
  await new Promise<void>((resolve, reject) => {
    session.once("remoteSettings", () => resolve());
    session.once("error", reject);
  });
  return { session, goaway: () => goaway, closed: () => closed };
}

/** Pings every `intervalMs` for `forMs` (stopping when the connection closes). */
async function pingFor(session: ClientHttp2Session, intervalMs: number, forMs: number): Promise<number> {
  let sent = 0;
  for (const until = Date.now() + forMs; Date.now() < until && !session.closed && !session.destroyed; sent++) {
    try {
      session.ping(() => {});
    } catch {
      break;
    }
    await sleep(intervalMs);
  }
  return sent;
}

const codeOf = async (call: Promise<unknown>): Promise<Code | "OK"> =>
  call.then(
    () => "OK" as const,
    (err: unknown) => ConnectError.from(err).code,
  );

describe("e2e attacks: the gRPC ports, probed from outside (reflection, pings, streams, deadlines, message size)", function () {
  this.timeout(60_000);
  let env: E2eMesh;
  let alice: string;

  before(async function () {
    this.timeout(120_000);
    env = await startE2eMesh("attacks-grpc-hardening", {
      envFor: {
        identity: { GRPC_REFLECTION: "true" },
        content: {
          GRPC_MAX_CONCURRENT_STREAMS: String(CONTENT_STREAMS),
          GRPC_MIN_PING_INTERVAL_WITHOUT_DATA_MS: String(CONTENT_PING_INTERVAL_MS),
          GRPC_DEFAULT_DEADLINE_MS: "300",
          GRPC_MAX_DEADLINE_MS: "300",
        },
        payments: {
          GRPC_MAX_DEADLINE_MS: String(PAYMENTS_MAX_DEADLINE_MS),
          GRPC_DEFAULT_DEADLINE_MS: String(PAYMENTS_DEFAULT_DEADLINE_MS),
          NODE_ENV: "test",
          FAULTS: `payments.hold-before-commit=1:${CHARGE_STALL_MS}`,
        },
      },
    });
    alice = await env.api.login(ALICE);
  });
  after(async function () {
    this.timeout(60_000);
    await env?.stop();
  });

  describe("reflection", () => {
    it("is off unless GRPC_REFLECTION=true: payments, orders and content answer UNIMPLEMENTED to a reflection client", async () => {
      for (const name of ["payments", "orders", "content"] as const)
        expect(await reflectedServices(env.mesh.ports[name]), name).to.equal(Code.Unimplemented);
    });

    it("with GRPC_REFLECTION=true (identity here, every service under npm start) lists the services", async () => {
      expect(await reflectedServices(env.mesh.ports.identity)).to.include.members([
        "switchyard.identity.v1.IdentityService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
      ]);
    });
  });

  describe("keepalive enforcement", () => {
    it("a client pinging every 10 ms with nothing sent to it is told GOAWAY ENHANCE_YOUR_CALM (too_many_pings) and the connection closes", async () => {
      // identity: the default policy (a ping per 10 s while nothing is sent, 2 strikes).
      const probe = await rawConnection(env.mesh.ports.identity);
      const sent = await pingFor(probe.session, 10, 3_000);
      expect(probe.goaway(), "GOAWAY").to.deep.equal({
        code: constants.NGHTTP2_ENHANCE_YOUR_CALM,
        data: "too_many_pings",
      });
      expect(sent, "pings sent before the server closed").to.be.within(3, 20);
      for (let i = 0; i < 50 && !probe.closed(); i++) await sleep(20);
      expect(probe.closed(), "connection closed").to.equal(true);
    });

    it("a client pinging no faster than the server allows keeps its connection", async () => {
      const probe = await rawConnection(env.mesh.ports.content);
      await pingFor(probe.session, CONTENT_PING_INTERVAL_MS + 200, 3_000);
      expect(probe.goaway(), "no GOAWAY").to.equal(undefined);
      expect(probe.closed()).to.equal(false);
      probe.session.close();
    });

    it("pings between calls that are answered are no strikes, however often (what gRPC's own BDP pings look like)", async () => {
      const probe = await rawConnection(env.mesh.ports.content);
      for (let i = 0; i < 20; i++) {
        probe.session.ping(() => {});
        // A health check answered between two pings: data was sent, so the next ping is no strike.
        const stream = probe.session.request({
          ":method": "POST",
          ":path": "/grpc.health.v1.Health/Check",
          "content-type": "application/grpc",
          te: "trailers",
        });
        stream.end(Buffer.from([0, 0, 0, 0, 0]));
        stream.resume();
        await new Promise((resolve) => stream.once("close", resolve));
      }
      expect(probe.goaway(), "no GOAWAY").to.equal(undefined);
      probe.session.close();
    });
  });

  describe("concurrent streams per connection", () => {
    it(`the server advertises SETTINGS_MAX_CONCURRENT_STREAMS = GRPC_MAX_CONCURRENT_STREAMS (${CONTENT_STREAMS} on content here; 1000 by default on identity)`, async () => {
      const content = await rawConnection(env.mesh.ports.content);
      const identity = await rawConnection(env.mesh.ports.identity);
      expect(content.session.remoteSettings.maxConcurrentStreams).to.equal(CONTENT_STREAMS);
      expect(identity.session.remoteSettings.maxConcurrentStreams).to.equal(1_000);
      content.session.close();
      identity.session.close();
    });

    it(`with ${CONTENT_STREAMS} live streams open on one channel, the next call waits until one of them ends`, async () => {
      const channel = openChannel(`127.0.0.1:${env.mesh.ports.content}`);
      const content = createServiceClient(ContentService, channel);
      const streams = Array.from({ length: CONTENT_STREAMS }, () => new AbortController());
      try {
        for (const s of streams) {
          const iterator = content
            .watchPosts({}, { headers: { authorization: `Bearer ${alice}` }, signal: s.signal })
            [Symbol.asyncIterator]();
          void iterator.next().catch(() => {});
        }
        await sleep(500);
        let answered = false;
        const next = content.listCatalogItems({ pageSize: 1 }, { timeoutMs: 10_000 }).then(() => (answered = true));
        await sleep(700);
        expect(answered, "answered while every stream slot of the connection was taken").to.equal(false);
        streams[0]!.abort();
        await next;
        expect(answered).to.equal(true);
      } finally {
        for (const s of streams) s.abort();
        channel.close();
      }
    });
  });

  describe("deadlines", () => {
    let channel: ReturnType<typeof openChannel>;
    before(() => {
      channel = openChannel(`127.0.0.1:${env.mesh.ports.payments}`);
    });
    after(() => channel.close());
    const charge = (options: { timeoutMs?: number }) =>
      createServiceClient(PaymentService, channel).createPayment(
        { idempotencyKey: newKey(), amount: 100n, currency: "EUR", source: "tok_visa" },
        { headers: { authorization: `Bearer ${alice}` }, ...options },
      );

    it(`a call asking for 60 s is cut to the ceiling (GRPC_MAX_DEADLINE_MS, ${PAYMENTS_MAX_DEADLINE_MS} ms here): DEADLINE_EXCEEDED then, though the charge stalls ${CHARGE_STALL_MS} ms`, async () => {
      const started = Date.now();
      expect(await codeOf(charge({ timeoutMs: 60_000 }))).to.equal(Code.DeadlineExceeded);
      expect(Date.now() - started).to.be.within(PAYMENTS_MAX_DEADLINE_MS - 50, PAYMENTS_MAX_DEADLINE_MS + 1_500);
    });

    it(`a call sent without a deadline gets the default (GRPC_DEFAULT_DEADLINE_MS, ${PAYMENTS_DEFAULT_DEADLINE_MS} ms here)`, async () => {
      const started = Date.now();
      expect(await codeOf(charge({}))).to.equal(Code.DeadlineExceeded);
      expect(Date.now() - started).to.be.within(
        PAYMENTS_DEFAULT_DEADLINE_MS - 50,
        PAYMENTS_DEFAULT_DEADLINE_MS + 1_500,
      );
    });

    it("a stream is exempt: a live feed opened without a deadline outlives the default by far and still delivers (content: 300 ms here)", async () => {
      const ch = openChannel(`127.0.0.1:${env.mesh.ports.content}`);
      const stop = new AbortController();
      try {
        const feed = createServiceClient(ContentService, ch).watchPosts(
          {},
          { headers: { authorization: `Bearer ${alice}` }, signal: stop.signal },
        );
        const firstPost = (async () => {
          for await (const message of feed) if (message.post) return message.post.title;
          return undefined;
        })();
        await sleep(1_500);
        const posted = await env.api.post("/v1/posts", {
          token: alice,
          json: { title: "after the default deadline", body: "still live" },
        });
        expect(posted.status, posted.text).to.equal(201);
        expect(await firstPost).to.equal("after the default deadline");
      } finally {
        stop.abort();
        ch.close();
      }
    });
  });

  describe("message size", () => {
    it(`a request over ${MAX_MESSAGE_BYTES / 1024 / 1024} MiB is refused with RESOURCE_EXHAUSTED before any handler (a user's token or none)`, async () => {
      const channel = openChannel(`127.0.0.1:${env.mesh.ports.content}`, [], { "grpc.max_send_message_length": -1 });
      try {
        const content = createServiceClient(ContentService, channel);
        const big = "x".repeat(MAX_MESSAGE_BYTES + 1);
        expect(
          await codeOf(
            content.createPost(
              { title: "big", body: big },
              { headers: { authorization: `Bearer ${alice}` }, timeoutMs: 10_000 },
            ),
          ),
        ).to.equal(Code.ResourceExhausted);
        expect(await codeOf(content.createPost({ title: "big", body: big }, { timeoutMs: 10_000 }))).to.equal(
          Code.ResourceExhausted,
        );
      } finally {
        channel.close();
      }
    });
  });
});
