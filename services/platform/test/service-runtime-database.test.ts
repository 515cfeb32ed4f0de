// A service process and its PostgreSQL server over time (a server of the test's own): started while
// the server is down, the process listens at once — liveness SERVING, readiness NOT_SERVING, its calls
// answered STORE_UNAVAILABLE — waits for the server with back-off, and serves once it is there. While
// it runs, the server going away answers its calls STORE_UNAVAILABLE at once, readiness turns
// NOT_SERVING only after DATABASE_UNREADY_AFTER_MS of failed checks, liveness never; the server back,
// it serves again within a second, without a restart.
import { expect } from "chai";
import { Writable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { Health, HealthCheckResponse_ServingStatus as Status } from "@switchyard/gen/health/v1/health_pb.js";
import { EchoService, echoImpl } from "@switchyard/platform/echo.js";
import { errorInfoOf, fail } from "@switchyard/platform/errors.js";
import { createLogger } from "@switchyard/platform/logger.js";
import { registration, LIVENESS } from "@switchyard/platform/server.js";
import { createServiceClient, openChannel } from "@switchyard/platform/grpc";
import { startServiceRuntime, type ServiceRuntime } from "@switchyard/platform/service-runtime.js";
import { startPostgresServer, type PostgresServer } from "./support/postgres-server.js";
import type { Logger } from "@switchyard/platform/logger.js";

const UNREADY_AFTER_MS = 1_500;

/** A logger whose lines the test reads. */
function recordingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const logger = createLogger("svc", "info", destination);
  return { logger, lines };
}

describe("a service and its PostgreSQL server over time (a server of its own)", function () {
  this.timeout(60_000);
  let server: PostgresServer;
  let runtime: ServiceRuntime | undefined;
  let starting: Promise<ServiceRuntime> | undefined;
  const log = recordingLogger();
  let channel: ReturnType<typeof openChannel>;

  before(async function () {
    const started = await startPostgresServer();
    if ("skip" in started) {
      console.log(`    (skipped: ${started.skip})`);
      this.skip();
    }
    server = started;
    await server.stop("fast");
  });

  after(async function () {
    this.timeout(30_000);
    channel?.close();
    await (runtime ?? (await starting?.catch(() => undefined)))?.stop();
    await server?.destroy();
  });

  const health = () => createServiceClient(Health, channel);
  const statusOf = (service: string) =>
    health()
      .check({ service }, { timeoutMs: 1_000 })
      .then((r) => Status[r.status]);
  const echo = (timeoutMs = 3_000) =>
    createServiceClient(EchoService, channel)
      .echo({ message: "hello" }, { timeoutMs })
      .then(
        (r) => r.message,
        (err: unknown) => {
          const e = ConnectError.from(err);
          return `${Code[e.code]} ${errorInfoOf(e)?.reason ?? ""}`.trim();
        },
      );

  async function until(check: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<number> {
    const started = Date.now();
    while (!(await check().catch(() => false))) {
      if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`);
      await sleep(25);
    }
    return Date.now() - started;
  }

  it("starts while the server is down: alive, not ready, calls answered STORE_UNAVAILABLE; serves once the server is up", async () => {
    starting = startServiceRuntime({
      name: "echo",
      config: {
        host: "127.0.0.1",
        port: 0,
        databaseUrl: server.url,
        databaseSchema: "echo",
        databaseUnreadyAfterMs: UNREADY_AFTER_MS,
        dataDir: "/nonexistent",
        drainTimeoutMs: 1_000,
        shedEventLoopDelayMs: 0,
        maxConnectionAgeMs: 0,
        maxConnectionAgeGraceMs: 0,
        listenFd: undefined,
      },
      logger: log.logger,
      migrations: [{ version: 1, name: "greetings", sql: "CREATE TABLE greetings (word text NOT NULL)" }],
      serves: [EchoService],
      build: ({ db }) => ({
        services: [
          registration(EchoService, {
            ...echoImpl(),
            async echo(req) {
              const { rows } = await db.query<{ word: string }>("SELECT $1::text AS word", [req.message]);
              if (!rows[0]) throw fail("INTERNAL", "no row");
              return { message: rows[0].word };
            },
          }),
        ],
      }),
    });
    // It listens although it cannot open its database: find its port from its log.
    let port = 0;
    await until(async () => {
      const line = log.lines.find((l) => l.includes("echo listening"));
      port = line ? (JSON.parse(line) as { port: number }).port : 0;
      return port > 0;
    }, "the process to listen");
    channel = openChannel(`127.0.0.1:${port}`);
    expect(await statusOf(LIVENESS)).to.equal("SERVING");
    expect(await statusOf("")).to.equal("NOT_SERVING");
    expect(await statusOf("switchyard.echo.v1.EchoService")).to.equal("NOT_SERVING");
    // A call waits for the service while it starts; one whose deadline comes first is answered, in time,
    // that the process waits for its database (it never ran).
    const short = Date.now();
    expect(await echo(600)).to.equal("Unavailable STORE_UNAVAILABLE");
    expect(Date.now() - short, "answered before its deadline").to.be.within(450, 600);
    const patient = echo(20_000);
    await sleep(600);
    expect(log.lines.join("")).to.include("waiting for the database");

    await server.start();
    runtime = await starting;
    expect(await patient, "the call that waited runs once the service serves").to.equal("hello");
    expect(await statusOf("")).to.equal("SERVING");
    expect(await echo()).to.equal("hello");
  });

  it("the server gone: calls answer STORE_UNAVAILABLE at once, readiness follows only after the stated time, liveness never", async () => {
    expect(runtime, "started").to.not.equal(undefined);
    await server.stop("immediate");
    const stopped = Date.now();
    expect(await echo()).to.equal("Unavailable STORE_UNAVAILABLE");
    expect(await statusOf(""), "a blip does not take it out of rotation").to.equal("SERVING");
    await until(async () => (await statusOf("")) === "NOT_SERVING", "readiness to turn NOT_SERVING");
    const unreadyAfter = Date.now() - stopped;
    expect(unreadyAfter, "not before the stated time").to.be.at.least(UNREADY_AFTER_MS);
    expect(unreadyAfter, "nor long after it").to.be.below(UNREADY_AFTER_MS + 3_500);
    expect(await statusOf(LIVENESS)).to.equal("SERVING");

    await server.start();
    const back = Date.now();
    const firstAnswer = await until(async () => (await echo()) === "hello", "the first answer");
    expect(firstAnswer, "the first call after the return succeeds within a second").to.be.below(1_000);
    await until(async () => (await statusOf("")) === "SERVING", "readiness to return");
    expect(Date.now() - back, "ready again within a second and a half").to.be.below(1_500);
  });
});
