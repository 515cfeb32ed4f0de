// OrderService over real gRPC with identity and payments: guarded transitions under concurrency,
// the chain to payments (charge, refund, deadline, payments down), and TrackOrders.
import { expect } from "chai";
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { OrderService, OrderStatus } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { createLogger, errorInfoOf, registration, startGrpcServer, type RunningServer } from "@switchyard/platform";
import type { ServiceImpl } from "@connectrpc/connect";
import { serviceEngines, startInProcessMesh, type InProcessMesh } from "../../platform/test/support/in-process-mesh.js";

type Auth = { headers: { authorization: string } };

async function failure(p: Promise<unknown>): Promise<{ code: Code; reason: string | undefined; message: string }> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err, "the call should have failed").to.be.instanceOf(ConnectError);
  const ce = err as ConnectError;
  return { code: ce.code, reason: errorInfoOf(ce)?.reason, message: ce.rawMessage };
}

for (const engine of serviceEngines()) {
  describe(`orders service over gRPC (${engine.name})`, function () {
    this.timeout(60_000);
    let mesh: InProcessMesh;
    let alice: Auth;
    let carol: Auth;
    before(async () => {
      mesh = await startInProcessMesh({ databaseUrl: engine.databaseUrl });
      alice = { headers: await mesh.login("alice@acme.test") };
      carol = { headers: await mesh.login("carol@globex.test") };
    });
    after(async () => mesh?.stop());

    const newOrder = async (unitPrice = 1500n, auth = alice) =>
      (await mesh.orders.createOrder({ currency: "EUR", items: [{ sku: "BOOK-1", quantity: 2n, unitPrice }] }, auth)).order!;

    it("walks pending → paid → shipped with totals computed by the service, the payment made in payments", async () => {
      const order = await newOrder();
      await mesh.orders.addItem({ orderId: order.id, item: { sku: "PEN", quantity: 1n, unitPrice: 250n } }, alice);
      const { order: discounted } = await mesh.orders.addDiscount({ orderId: order.id, code: "WELCOME", amount: 250n }, alice);
      expect(discounted!.total).to.equal(3000n);
      const paid = await mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, alice);
      expect(paid.order!.status).to.equal(OrderStatus.PAID);
      const { payment } = await mesh.payments.getPayment({ paymentId: paid.paymentId }, alice);
      expect(payment!.amount).to.equal(3000n);
      expect((await failure(mesh.orders.addItem({ orderId: order.id, item: { sku: "X", quantity: 1n, unitPrice: 1n } }, alice))).reason).to.equal("INVALID_STATE");
      const shipped = await mesh.orders.shipOrder({ orderId: order.id, carrier: "DHL" }, alice);
      expect(shipped.order!.status).to.equal(OrderStatus.SHIPPED);
      const refused = await failure(mesh.orders.cancelOrder({ orderId: order.id }, alice));
      expect(refused).to.include({ code: Code.FailedPrecondition, reason: "INVALID_STATE" });
      expect(refused.message).to.include("shipped");
    });

    it("refunds a paid order when it is cancelled, and a retried pay never charges twice", async () => {
      const order = await newOrder(999n);
      const first = await mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, alice);
      const again = await failure(mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, alice));
      expect(again.reason).to.equal("INVALID_STATE");
      const cancelled = await mesh.orders.cancelOrder({ orderId: order.id }, alice);
      expect(cancelled.order!.status).to.equal(OrderStatus.CANCELLED);
      const refunds = await mesh.payments.listRefunds({ paymentId: first.paymentId }, alice);
      expect(refunds.refunds.map((r) => r.id)).to.deep.equal([cancelled.refundId]);
      expect(refunds.refunds[0]!.amount).to.equal(1998n);
      const payments = await mesh.payments.listPayments({ pageSize: 100 }, alice);
      expect(payments.payments.filter((p) => p.id === first.paymentId)).to.have.length(1);
    });

    for (const [a, b] of [["cancel", "cancel"], ["ship", "cancel"], ["pay", "pay"]] as const) {
      it(`two concurrent ${a} + ${b} of one order: exactly one succeeds, the other gets 409`, async () => {
        const order = await newOrder();
        if (a === "ship") await mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, alice);
        const run = (action: "cancel" | "ship" | "pay") =>
          action === "cancel"
            ? mesh.orders.cancelOrder({ orderId: order.id }, alice)
            : action === "ship"
              ? mesh.orders.shipOrder({ orderId: order.id }, alice)
              : mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, alice);
        const results = await Promise.allSettled([run(a), run(b)]);
        expect(results.filter((r) => r.status === "fulfilled")).to.have.length(1);
        const rejected = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
        expect(errorInfoOf(rejected.reason as ConnectError)?.reason).to.equal("INVALID_STATE");
        if (a === "pay") {
          const final = (await mesh.orders.getOrder({ orderId: order.id }, alice)).order!;
          const { refunds } = await mesh.payments.listRefunds({ paymentId: final.paymentId }, alice);
          expect(refunds, "the losing pay charged nothing extra and refunded nothing").to.have.length(0);
        }
      });
    }

    it("refuses a PATCH that writes status, naming the action resources", async () => {
      const order = await newOrder();
      const refused = await failure(mesh.orders.updateOrder({ orderId: order.id, status: "cancelled" }, alice));
      expect(refused.reason).to.equal("RULE_VIOLATION");
      expect(refused.message).to.include("/cancel");
      const patched = await mesh.orders.updateOrder({ orderId: order.id, note: "leave at the door" }, alice);
      expect(patched.order!.note).to.equal("leave at the door");
      expect(patched.order!.status).to.equal(OrderStatus.PENDING);
    });

    it("keeps another tenant's orders invisible", async () => {
      const order = await newOrder();
      expect((await failure(mesh.orders.getOrder({ orderId: order.id }, carol))).code).to.equal(Code.NotFound);
      expect((await failure(mesh.orders.cancelOrder({ orderId: order.id }, carol))).code).to.equal(Code.NotFound);
    });

    it("lists a user's orders by keyset across inserts: no duplicate, no gap", async () => {
      const existing: bigint[] = [];
      for (let i = 0; i < 7; i++) existing.push((await newOrder(BigInt(100 + i))).id);
      const seen: bigint[] = [];
      let token = "";
      do {
        const page = await mesh.orders.listUserOrders({ userId: 1n, pageSize: 3, pageToken: token }, alice);
        seen.push(...page.orders.map((o) => o.id));
        token = page.nextPageToken;
        await newOrder(1n);
      } while (token);
      expect(new Set(seen).size).to.equal(seen.length);
      for (const id of existing) expect(seen).to.include(id);
    });

    it("streams status changes on TrackOrders to a client other than grpc-js, and cancelling it ends only that stream", async () => {
      const order = await newOrder();
      const transport = createGrpcTransport({ baseUrl: `http://${mesh.ordersAddress}` });
      const client = createClient(OrderService, transport);
      const controller = new AbortController();
      const follows = (async function* () {
        yield { action: { case: "followOrderId" as const, value: order.id } };
        yield { action: { case: "followOrderId" as const, value: 999_999_999n } };
        await sleep(60_000);
      })();
      const seen: string[] = [];
      const tracking = (async () => {
        try {
          for await (const event of client.trackOrders(follows, { signal: controller.signal, headers: alice.headers })) {
            seen.push(`${event.orderId}:${OrderStatus[event.status]}`);
            if (seen.length === 2) {
              await mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, alice);
              await mesh.orders.shipOrder({ orderId: order.id }, alice);
            }
            if (seen.length === 4) controller.abort();
          }
        } catch (err) {
          return ConnectError.from(err).code;
        }
        return undefined;
      })();
      expect(await tracking).to.equal(Code.Canceled);
      expect(seen).to.deep.equal([`${order.id}:PENDING`, "999999999:UNSPECIFIED", `${order.id}:PAID`, `${order.id}:SHIPPED`]);
      // The same HTTP/2 connection still carries other calls.
      expect((await client.getOrder({ orderId: order.id }, { headers: alice.headers })).order!.status).to.equal(OrderStatus.SHIPPED);
      for (let i = 0; i < 50 && mesh.ordersRuntime.events.listenerCount() > 0; i++) await sleep(20);
      expect(mesh.ordersRuntime.events.listenerCount(), "the cancelled stream left no subscription behind").to.equal(0);
    });
  });
}

describe("orders → payments chain failures (over gRPC)", function () {
  this.timeout(60_000);
  let slowPayments: RunningServer;
  let mesh: InProcessMesh;
  let alice: Auth;
  const observed: { aborted: boolean }[] = [];
  let mode: "slow" | "down" = "slow";

  before(async () => {
    // A payments stand-in that is slow, and records whether the caller's deadline reached it.
    const impl: Partial<ServiceImpl<typeof PaymentService>> = {
      async createPayment(_req, ctx) {
        await sleep(3_000, undefined, { signal: ctx.signal }).catch(() => {});
        observed.push({ aborted: ctx.signal.aborted });
        throw new ConnectError("too late", Code.Internal);
      },
    };
    slowPayments = await startGrpcServer({ name: "slow-payments", host: "127.0.0.1", port: 0, services: [registration(PaymentService, impl as ServiceImpl<typeof PaymentService>)], logger: createLogger("test", "silent") });
    mesh = await startInProcessMesh({ paymentsAddressForOrders: `127.0.0.1:${slowPayments.port}` });
    alice = { headers: await mesh.login("alice@acme.test") };
  });
  after(async () => {
    await mesh?.stop();
    if (mode === "slow") await slowPayments?.shutdown();
  });

  it("ends the downstream call when the caller's deadline expires mid-chain, and leaves the order unchanged", async () => {
    const order = (await mesh.orders.createOrder({ currency: "EUR", items: [{ sku: "A", quantity: 1n, unitPrice: 100n }] }, alice)).order!;
    const started = Date.now();
    const err = await failure(mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, { ...alice, timeoutMs: 400 }));
    expect(err.code).to.equal(Code.DeadlineExceeded);
    expect(Date.now() - started).to.be.lessThan(1_500);
    for (let i = 0; i < 50 && observed.length === 0; i++) await sleep(20);
    expect(observed[0], "payments saw its call cancelled well before its 3 s work").to.deep.equal({ aborted: true });
    expect((await mesh.orders.getOrder({ orderId: order.id }, alice)).order!.status).to.equal(OrderStatus.PENDING);
  });

  it("answers UNAVAILABLE at once when payments is down, and leaves the order unchanged", async () => {
    mode = "down";
    await slowPayments.shutdown();
    const order = (await mesh.orders.createOrder({ currency: "EUR", items: [{ sku: "A", quantity: 1n, unitPrice: 100n }] }, alice)).order!;
    const started = Date.now();
    const err = await failure(mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, { ...alice, timeoutMs: 5_000 }));
    expect(err.code).to.equal(Code.Unavailable);
    expect(Date.now() - started).to.be.lessThan(2_000);
    expect((await mesh.orders.getOrder({ orderId: order.id }, alice)).order!.status).to.equal(OrderStatus.PENDING);
  });
});
