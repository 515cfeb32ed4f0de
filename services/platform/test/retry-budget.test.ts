// Retries have a budget (issue 46): a read answered UNAVAILABLE is tried again up to 3 times, but a
// service that sheds (LOAD_SHED) says not to retry it (grpc-retry-pushback-ms), and retries to a peer
// that keeps failing stop once the channel's retry budget is spent — over real gRPC, counted where the
// calls arrive.
import { expect } from "chai";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { errorInfoOf, fail } from "@switchyard/platform/errors.js";
import { createLogger } from "@switchyard/platform/logger.js";
import { createServiceClient, openChannel, RETRY_BUDGET } from "@switchyard/platform/grpc";
import { registration, startGrpcServer, type RunningServer } from "@switchyard/platform/server.js";

const logger = createLogger("test", "silent");
const CALLS = 200;

/** A payments service whose GetPayment (a read: retried on UNAVAILABLE) always refuses with `refusal`. */
async function refusingService(refusal: () => Error): Promise<{ server: RunningServer; received: () => number }> {
  let received = 0;
  const impl: Partial<ServiceImpl<typeof PaymentService>> = {
    getPayment() {
      received++;
      throw refusal();
    },
  };
  const server = await startGrpcServer({
    name: "payments",
    host: "127.0.0.1",
    port: 0,
    logger,
    services: [registration(PaymentService, impl as ServiceImpl<typeof PaymentService>)],
  });
  return { server, received: () => received };
}

/** CALLS reads, twenty at a time, on a fresh channel; the reason each ended with. */
async function readAll(port: number): Promise<string[]> {
  // A target of its own: grpc-js keeps one retry budget per target across channels.
  const channel = openChannel(`127.0.0.1:${port}`, [PaymentService]);
  try {
    const payments = createServiceClient(PaymentService, channel);
    const read = (i: number) =>
      payments.getPayment({ paymentId: `pay_${i}` }, { timeoutMs: 10_000 }).then(
        () => "OK",
        (err: unknown) => {
          const e = ConnectError.from(err);
          return `${Code[e.code]} ${errorInfoOf(e)?.reason ?? ""}`.trim();
        },
      );
    const reasons: string[] = [];
    for (let i = 0; i < CALLS; i += 20) {
      reasons.push(...(await Promise.all(Array.from({ length: 20 }, (_, j) => read(i + j)))));
    }
    return reasons;
  } finally {
    channel.close();
  }
}

describe("retry budget and pushback (gateway → services, service → service)", function () {
  this.timeout(20_000);
  let running: RunningServer | undefined;
  afterEach(async () => {
    await running?.shutdown();
    running = undefined;
  });

  it("a service that sheds receives no more calls than were sent to it", async () => {
    const service = await refusingService(() => fail("LOAD_SHED", "the service is overloaded"));
    running = service.server;
    const reasons = await readAll(service.server.port);
    expect(new Set(reasons)).to.deep.equal(new Set(["Unavailable LOAD_SHED"]));
    // Without the pushback each read would be tried 3 times (up to the budget): 30 + retries.
    expect(service.received()).to.equal(CALLS);
  });

  it("a peer that keeps answering UNAVAILABLE gets at most 100 retries for 200 reads, not up to five a read", async () => {
    const service = await refusingService(() => new ConnectError("the replica is stopping", Code.Unavailable));
    running = service.server;
    const reasons = await readAll(service.server.port);
    expect(new Set(reasons)).to.deep.equal(new Set(["Unavailable"]));
    const retries = service.received() - CALLS;
    // Each failed attempt costs a token; retries stop at half the tokens: at most maxTokens / 2 retries in
    // grpc-js (an answer not begun) and as many in the client's own (an answer begun).
    expect(retries, "some reads were retried (the policy is on)").to.be.above(0);
    expect(retries, "retries held to the budget").to.be.at.most(RETRY_BUDGET.maxTokens);
  });
});
