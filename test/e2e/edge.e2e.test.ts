// Edge failure semantics with real processes: a client-chosen deadline, load shedding at the
// gateway, and a client that hangs up cancelling the work below it.
import { expect } from "chai";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { OrderService } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { createServiceClient, openChannel } from "@switchyard/platform/grpc";
import { ALICE, Api, expectError, newKey, startE2eMesh, type E2eMesh } from "../support/http.js";

describe("e2e: deadlines, shedding and cancellation at the edge", function () {
  this.timeout(120_000);
  let env: E2eMesh;
  let api: Api;
  let token: string;
  let paymentPath: string;

  before(async () => {
    env = await startE2eMesh("edge", {
      envFor: {
        gateway: {
          GATEWAY_DEADLINE_MS: "3000",
          GATEWAY_CONCURRENCY_INITIAL: "2",
          GATEWAY_CONCURRENCY_MIN: "2",
          GATEWAY_CONCURRENCY_MAX: "2",
        },
        // A money step left unsettled by a cancelled call is settled soon after its deadline.
        orders: { ORDERS_RECONCILE_INTERVAL_MS: "300" },
      },
    });
    api = new Api(env.mesh.gatewayUrl);
    token = await api.login(ALICE);
    const created = await api.post("/v1/payments", {
      token,
      key: newKey(),
      json: { amount: 700, currency: "EUR", source: "tok_edge" },
    });
    expect(created.status, created.text).to.equal(201);
    paymentPath = created.headers.get("location")!;
  });
  afterEach(() => {
    env.mesh.process("payments").kill("SIGCONT");
  });
  after(async () => env?.stop());

  it("refuses a malformed X-Request-Timeout-Ms with 400", async () => {
    for (const bad of ["abc", "0", "-5", "1.5"])
      expectError(
        await api.get(paymentPath, { token, headers: { "x-request-timeout-ms": bad } }),
        400,
        "INVALID_REQUEST",
      );
  });

  it("honours a shorter deadline the client asks for: 504 at that deadline, not the default", async () => {
    env.mesh.process("payments").kill("SIGSTOP");
    const res = await api.get(paymentPath, { token, headers: { "x-request-timeout-ms": "400" } });
    expectError(res, 504, "DEADLINE_EXCEEDED");
    expect(res.ms).to.be.within(350, 2_000);
  });

  it("sheds beyond the concurrency limit with 503 + Retry-After at once, instead of queueing", async () => {
    env.mesh.process("payments").kill("SIGSTOP");
    const stuck = [api.get(paymentPath, { token }), api.get(paymentPath, { token })];
    await sleep(300);
    const shed = await api.get(paymentPath, { token });
    expectError(shed, 503, "LOAD_SHED");
    expect(shed.headers.get("retry-after")).to.equal("1");
    expect(shed.headers.get("x-ratelimit-limit"), "a shed answer still carries the caller's quota").to.match(/^\d+$/);
    expect(shed.headers.get("x-ratelimit-remaining")).to.match(/^\d+$/);
    expect(shed.ms, "shed within milliseconds, not at the deadline").to.be.lessThan(500);
    // The refusal is the gateway's: a shed request does not draw on the caller's quota (a window
    // that began anew between the two could only raise what is left).
    const shedAgain = await api.get(paymentPath, { token });
    expectError(shedAgain, 503, "LOAD_SHED");
    expect(
      Number(shedAgain.headers.get("x-ratelimit-remaining")),
      "nothing drawn by the first shed answer",
    ).to.be.at.least(Number(shed.headers.get("x-ratelimit-remaining")));
    env.mesh.process("payments").kill("SIGCONT");
    // Held calls finish, time out, or are shed by payments itself (its event loop saw the pause).
    for (const res of await Promise.all(stuck)) expect(res.status).to.be.oneOf([200, 503, 504]);
    // As a client should: after Retry-After, it is served again.
    let status = 0;
    for (let i = 0; i < 5 && status !== 200; i++) {
      await sleep(1_000);
      status = (await api.get(paymentPath, { token })).status;
    }
    expect(status).to.equal(200);
  });

  describe("gRPC interop cases against the services' own processes", () => {
    const code = async (p: Promise<unknown> | AsyncIterable<unknown>) => {
      try {
        if (Symbol.asyncIterator in p) for await (const _ of p) void _;
        else await p;
      } catch (err) {
        return ConnectError.from(err).code;
      }
      return undefined;
    };

    it("cancel_after_begin: a client-streaming call cancelled before any message ends as CANCELLED, and the service serves on", async () => {
      const channel = openChannel(`127.0.0.1:${env.mesh.ports.content}`);
      try {
        const content = createServiceClient(ContentService, channel);
        const controller = new AbortController();
        const never = (async function* () {
          await sleep(60_000);
          yield { item: { sku: "NEVER", name: "never", price: 1n, currency: "EUR" } };
        })();
        const call = content.importItems(never, {
          signal: controller.signal,
          headers: { authorization: `Bearer ${token}` },
        });
        await sleep(100);
        controller.abort();
        expect(await code(call)).to.equal(Code.Canceled);
        expect((await content.listCatalogItems({ page: 1, pageSize: 1 })).items).to.have.length(1);
      } finally {
        channel.close();
      }
    });

    it("timeout_on_sleeping_server: a bidi call with a 1 ms deadline ends as DEADLINE_EXCEEDED", async () => {
      const channel = openChannel(`127.0.0.1:${env.mesh.ports.orders}`);
      try {
        const orders = createServiceClient(OrderService, channel);
        const follow = (async function* () {
          yield { action: { case: "followOrderId" as const, value: 1n } };
          await sleep(60_000);
        })();
        expect(
          await code(orders.trackOrders(follow, { timeoutMs: 1, headers: { authorization: `Bearer ${token}` } })),
        ).to.equal(Code.DeadlineExceeded);
      } finally {
        channel.close();
      }
    });
  });

  it("cancels the work below when the HTTP client hangs up mid-request (seen in the service's log)", async () => {
    const order = await api.post("/v1/orders", {
      token,
      json: { currency: "EUR", items: [{ sku: "BOOK-1", quantity: 1 }] },
    });
    expect(order.status, order.text).to.equal(201);
    env.mesh.process("payments").kill("SIGSTOP");
    const controller = new AbortController();
    const pending = api
      .post(`/v1/orders/${order.json.id}/payment`, { token, json: { source: "tok_edge" }, signal: controller.signal })
      .catch((err: unknown) => err);
    await sleep(400);
    controller.abort();
    await pending;
    // The call to payments is cancelled at once. PayOrder itself then asks payments (still paused) what
    // became of the charge it had started — for at most its resolve timeout (3 s) — before it ends as
    // cancelled: payments stays paused until then, so the step cannot settle as paid meanwhile.
    let logged = false;
    for (const until = Date.now() + 10_000; !logged && Date.now() < until;) {
      logged = env.mesh.logs
        .join("")
        .split("\n")
        .some(
          (line) =>
            line.includes('"service":"orders"') &&
            line.includes("OrderService/PayOrder") &&
            line.includes('"code":"Canceled"'),
        );
      if (!logged) await sleep(50);
    }
    expect(logged, "orders logged its PayOrder call as cancelled by the caller").to.equal(true);
    env.mesh.process("payments").kill("SIGCONT");
    // The charge was recorded as a money step before payments was called. Cancelled, the call's outcome
    // is unknown to orders (payments, paused, may still take it when it resumes), so the step is settled
    // by asking payments under its key: charged after all (paid, with that one payment) or never (still
    // pending, nothing charged). Read until it is settled.
    let after = await api.get(`/v1/orders/${order.json.id}`, { token });
    for (
      const until = Date.now() + 30_000;
      after.status === 200 && after.json.step_in_progress !== null && Date.now() < until;
    ) {
      await sleep(100);
      after = await api.get(`/v1/orders/${order.json.id}`, { token });
    }
    expect(after.status, after.text).to.equal(200);
    expect(after.json.step_in_progress, `settled: ${after.text}`).to.equal(null);
    expect(after.json.status, after.text).to.be.oneOf(["pending", "paid"]);
    const charges = (await api.listAll("/v1/payments", token)).filter((p) => p.reference === `order:${order.json.id}`);
    if (after.json.status === "paid")
      expect(charges.map((p) => [p.id, p.amount, p.amount_refunded])).to.deep.equal([
        [after.json.payment_id, 1_500, 0],
      ]);
    else expect(charges, "a pending order was never charged").to.deep.equal([]);
  });
});
