// The event-loop-delay guard: a saturated service sheds new calls with LOAD_SHED, over real gRPC,
// while health still answers.
import { expect } from "chai";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus } from "@switchyard/gen/health/v1/health_pb.js";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import { createLogger } from "@switchyard/platform/logger.js";
import { createServiceClient, openChannel } from "@switchyard/platform/grpc";
import { echoImpl, EchoService } from "@switchyard/platform/echo.js";
import { EventLoopGuard, sampleEveryMs } from "@switchyard/platform/load-shed.js";
import { PRIORITY_HEADER } from "@switchyard/platform/priority.js";
import { registration, startGrpcServer } from "@switchyard/platform/server.js";

function block(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // Saturate the event loop on purpose.
  }
}

/** An echo server that sheds once its event loop lags `thresholdMs` (as a service's does). */
const echoServerShedding = (thresholdMs: number) =>
  startGrpcServer({
    name: "shed",
    host: "127.0.0.1",
    port: 0,
    services: [registration(EchoService, echoImpl())],
    logger: createLogger("test", "silent"),
    shedEventLoopDelayMs: thresholdMs,
  });

describe("event-loop-delay guard", function () {
  this.timeout(20_000);

  it("sheds while the loop lags across windows (not after one pause), and admits again once it has caught up", async () => {
    const guard = new EventLoopGuard(50, 200);
    try {
      expect(() => guard.admit()).to.not.throw();
      // One pause alone is not saturation.
      block(300);
      await sleep(5);
      expect(() => guard.admit()).to.not.throw();
      await sleep(450);
      // A saturated loop: busy across whole sampling windows.
      for (let i = 0; i < 5; i++) {
        block(150);
        await sleep(1);
      }
      expect(guard.lag).to.be.greaterThan(50);
      expect(() => guard.admit()).to.throw(ConnectError, /overloaded/);
      await sleep(650);
      expect(() => guard.admit()).to.not.throw();
    } finally {
      guard.stop();
    }
  });

  it("samples the loop a tenth of its threshold apart, within 10–50 ms (an idle service is not woken 100 times a second)", () => {
    expect(sampleEveryMs(500)).to.equal(50);
    expect(sampleEveryMs(200)).to.equal(20);
    expect(sampleEveryMs(50)).to.equal(10);
    expect(sampleEveryMs(5)).to.equal(10);
    expect(sampleEveryMs(10_000)).to.equal(50);
  });

  it("at the default threshold (500 ms, sampled every 50 ms) still sees a saturated loop and sheds sheddable calls, not critical ones", async () => {
    const guard = new EventLoopGuard(500, 500);
    try {
      await sleep(550);
      // Busy across whole windows, the loop turning only every 350 ms: a lag between half the threshold
      // and all of it. The guard reads its lag once a window, at a turn the blocks leave it: how many
      // blocks that takes depends on where its windows fall (a CI run once read an idle window after
      // five), so the loop stays saturated until it has seen two windows of it — for at most 4 s.
      let blocks = 0;
      const seesSaturation = () => {
        try {
          guard.admit("sheddable");
          return false;
        } catch {
          return true;
        }
      };
      while (blocks < 12 && (blocks < 5 || !seesSaturation())) {
        block(350);
        await sleep(1);
        blocks++;
      }
      expect(guard.lag, `the lag read after ${blocks} blocks of 350 ms`).to.be.greaterThan(250);
      expect(() => guard.admit("sheddable")).to.throw(ConnectError, /overloaded/);
      // Critical calls bear twice the threshold: a loop 350 ms behind (and what a busy CI machine adds) still admits them.
      expect(() => guard.admit("critical")).to.not.throw();
    } finally {
      guard.stop();
    }
  });

  it("answers UNAVAILABLE / LOAD_SHED over gRPC, and health still answers", async () => {
    const server = await echoServerShedding(50);
    const channel = openChannel(`127.0.0.1:${server.port}`);
    try {
      const echo = createServiceClient(EchoService, channel);
      const health = createServiceClient(Health, channel);
      expect((await echo.echo({ message: "warm" })).message).to.equal("warm");
      // The guard samples every 500 ms: keep the loop saturated across a whole window.
      for (let i = 0; i < 9; i++) {
        block(200);
        await sleep(1);
      }
      const err = (await echo.echo({ message: "late" }).catch((e: unknown) => e)) as ConnectError;
      expect(err.code).to.equal(Code.Unavailable);
      expect(errorInfoOf(err)?.reason).to.equal("LOAD_SHED");
      expect((await health.check({ service: "" })).status).to.equal(HealthCheckResponse_ServingStatus.SERVING);
    } finally {
      channel.close();
      await server.shutdown();
    }
  });

  it("sheds the least valuable first: sheddable from half the threshold, critical only from twice it", async () => {
    // Sheddable calls shed from 100 ms of lag, default ones from 200 ms, critical ones from 400 ms.
    const server = await echoServerShedding(200);
    const channel = openChannel(`127.0.0.1:${server.port}`);
    const asked = (priority: string) =>
      createServiceClient(EchoService, channel)
        .echo({ message: priority }, { headers: { [PRIORITY_HEADER]: priority } })
        .then(
          (r) => r.message,
          (e: unknown) => errorInfoOf(ConnectError.from(e))?.reason,
        );
    try {
      expect(await asked("sheddable")).to.equal("sheddable");
      // ~260 ms behind across whole windows (more on a loaded machine, but not 400): beyond sheddable's
      // and default's, within critical's.
      for (let i = 0; i < 9; i++) {
        block(260);
        await sleep(1);
      }
      const answers = [await asked("sheddable"), await asked("default"), await asked("critical")];
      expect(answers).to.deep.equal(["LOAD_SHED", "LOAD_SHED", "critical"]);
    } finally {
      channel.close();
      await server.shutdown();
    }
  });
});
