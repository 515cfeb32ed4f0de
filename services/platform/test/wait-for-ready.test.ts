// A call with a deadline waits for a ready connection (gRPC's wait-for-ready): a peer that comes back
// within the deadline answers it — reads and writes alike, since neither was sent before — and one
// that does not answers UPSTREAM_UNREACHABLE (never sent: nothing done), not a deadline whose work
// may have happened. A call whose connection breaks after it was sent is not told apart as unsent.
import { expect } from "chai";
import { freePort } from "./support/free-port.js";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { EchoService, echoImpl } from "@switchyard/platform/echo.js";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import { createLogger } from "@switchyard/platform/logger.js";
import { registration, startGrpcServer, type RunningServer } from "@switchyard/platform/server.js";
import { createServiceClient, openChannel } from "@switchyard/platform/grpc";

const logger = createLogger("test", "silent");

const outcome = (p: Promise<{ message: string }>) =>
  p.then(
    (r) => r.message,
    (err: unknown) => {
      const e = ConnectError.from(err);
      return `${Code[e.code]} ${errorInfoOf(e)?.reason ?? "(no reason)"}`;
    },
  );

describe("calls wait for a ready connection within their deadline", function () {
  this.timeout(20_000);
  let port: number;
  let server: RunningServer | undefined;
  const start = async () => {
    server = await startGrpcServer({
      name: "echo",
      host: "127.0.0.1",
      port,
      logger,
      services: [registration(EchoService, echoImpl())],
    });
  };

  beforeEach(async () => {
    port = await freePort();
  });
  afterEach(async () => {
    await server?.shutdown();
    server = undefined;
  });

  it("a peer that starts during the deadline answers the call, which waited for it", async () => {
    const channel = openChannel(`127.0.0.1:${port}`);
    try {
      const echo = createServiceClient(EchoService, channel);
      // Nothing listens yet: the first connection attempt is refused and the channel backs off.
      const started = Date.now();
      const answer = outcome(echo.echo({ message: "waited" }, { timeoutMs: 4_000 }));
      await sleep(400);
      await start();
      expect(await answer).to.equal("waited");
      expect(Date.now() - started, "answered once the peer was there (reconnect back-off ≤ 1 s)").to.be.below(2_500);
    } finally {
      channel.close();
    }
  });

  it("a peer that does not come back in time: UPSTREAM_UNREACHABLE at the deadline, never a deadline of a sent call", async () => {
    const channel = openChannel(`127.0.0.1:${port}`);
    try {
      const echo = createServiceClient(EchoService, channel);
      const started = Date.now();
      expect(await outcome(echo.echo({ message: "x" }, { timeoutMs: 600 }))).to.equal(
        "Unavailable UPSTREAM_UNREACHABLE",
      );
      expect(Date.now() - started).to.be.within(550, 1_500);
      // Without a deadline a call does not wait (it would wait for ever): unreachable at once.
      const quick = Date.now();
      expect(await outcome(echo.echo({ message: "x" }))).to.equal("Unavailable UPSTREAM_UNREACHABLE");
      expect(Date.now() - quick).to.be.below(1_500);
    } finally {
      channel.close();
    }
  });

  it("a call sent to a peer that then goes away is not called unsent: no UPSTREAM_UNREACHABLE", async () => {
    await start();
    const channel = openChannel(`127.0.0.1:${port}`);
    try {
      const echo = createServiceClient(EchoService, channel);
      expect(await outcome(echo.echo({ message: "up" }, { timeoutMs: 2_000 }))).to.equal("up");
      const slow = outcome(echo.echo({ message: "slow", delayMs: 5_000 }, { timeoutMs: 3_000 }));
      await sleep(200);
      await Promise.race([server!.shutdown(), sleep(100)]);
      // The server ends its open calls when its drain times out; a call cut so may have done its work.
      const got = await slow;
      expect(got).to.not.include("UPSTREAM_UNREACHABLE");
      expect(got).to.not.equal("slow");
    } finally {
      channel.close();
    }
  });
});
