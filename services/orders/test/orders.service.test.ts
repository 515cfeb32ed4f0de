// OrderService over real gRPC with identity, payments and content: guarded transitions under
// concurrency, prices from the catalog, who may do what, the money steps to payments (charge,
// refund, deadline, payments away and back, a stall before or after payments commits), and TrackOrders.
import { expect } from "chai";
import pg from "pg";
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { OrderService, OrderStatus, OrderStep } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { Role } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import { createLogger } from "@switchyard/platform/logger.js";
import { registration, startGrpcServer, type RunningServer } from "@switchyard/platform/server.js";
import type { ServiceImpl } from "@connectrpc/connect";
import { serviceEngines, startInProcessMesh, type InProcessMesh } from "../../platform/test/support/in-process-mesh.js";

type Auth = { headers: { authorization: string } };

async function failure(p: Promise<unknown>): Promise<{ code: Code; reason: string | undefined; message: string }> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
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

    // BOOK-1 is 1500 EUR in the demo catalog.
    const newOrder = async (quantity = 2n, auth = alice) =>
      (await mesh.orders.createOrder({ currency: "EUR", items: [{ sku: "BOOK-1", quantity }] }, auth)).order!;

    it("walks pending → paid → shipped with totals computed by the service, the payment made in payments", async () => {
      const order = await newOrder();
      await mesh.orders.addItem({ orderId: order.id, item: { sku: "PEN-1", quantity: 1n } }, alice);
      const { order: discounted } = await mesh.orders.addDiscount(
        { orderId: order.id, code: "WELCOME", amount: 500n },
        alice,
      );
      expect(discounted!.total).to.equal(5000n);
      const paid = await mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, alice);
      expect(paid.order!.status).to.equal(OrderStatus.PAID);
      expect(paid.order!.stepInProgress).to.equal(OrderStep.UNSPECIFIED);
      const { payment } = await mesh.payments.getPayment({ paymentId: paid.paymentId }, alice);
      expect(payment!.amount).to.equal(5000n);
      expect(payment!.reference).to.equal(`order:${order.id}`);
      expect(payment!.ownerUserId).to.equal(order.userId);
      expect(
        (await failure(mesh.orders.addItem({ orderId: order.id, item: { sku: "MUG-1", quantity: 1n } }, alice))).reason,
      ).to.equal("INVALID_STATE");
      const shipped = await mesh.orders.shipOrder({ orderId: order.id, carrier: "DHL" }, alice);
      expect(shipped.order!.status).to.equal(OrderStatus.SHIPPED);
      const refused = await failure(mesh.orders.cancelOrder({ orderId: order.id }, alice));
      expect(refused).to.include({ code: Code.FailedPrecondition, reason: "INVALID_STATE" });
      expect(refused.message).to.include("shipped");
    });

    it("refunds a paid order when it is cancelled, and a retried pay never charges twice", async () => {
      const order = await newOrder(3n);
      const first = await mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, alice);
      const again = await failure(mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, alice));
      expect(again.reason).to.equal("INVALID_STATE");
      const cancelled = await mesh.orders.cancelOrder({ orderId: order.id }, alice);
      expect(cancelled.order!.status).to.equal(OrderStatus.CANCELLED);
      const refunds = await mesh.payments.listRefunds({ paymentId: first.paymentId }, alice);
      expect(refunds.refunds.map((r) => r.id)).to.deep.equal([cancelled.refundId]);
      expect(refunds.refunds[0]!.amount).to.equal(4500n);
      const payments = await mesh.payments.listPayments({ pageSize: 100 }, alice);
      expect(payments.payments.filter((p) => p.id === first.paymentId)).to.have.length(1);
    });

    for (const [a, b] of [
      ["cancel", "cancel"],
      ["ship", "cancel"],
      ["pay", "pay"],
    ] as const) {
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
        // The loser finds the order moved on — or its money step under way.
        expect(errorInfoOf(rejected.reason as ConnectError)?.reason).to.be.oneOf(["INVALID_STATE", "STEP_IN_PROGRESS"]);
        if (a === "pay") {
          const final = (await mesh.orders.getOrder({ orderId: order.id }, alice)).order!;
          const { refunds } = await mesh.payments.listRefunds({ paymentId: final.paymentId }, alice);
          expect(refunds, "the losing pay charged nothing extra and refunded nothing").to.have.length(0);
        }
      });
    }

    // The call's deadline reaches the store with the call (callScopeOf): its transaction's lock wait is
    // bounded by it on the server, not left waiting after the caller was answered. (Embedded PGlite runs
    // one statement at a time: there is no lock to wait on.)
    if (engine.databaseUrl)
      it("ends a change that waits on the order's lock at the call's deadline, on the database too", async () => {
        const holder = new pg.Client(engine.databaseUrl);
        await holder.connect();
        try {
          for (const [what, change] of [
            [
              "a note",
              (orderId: bigint) => mesh.orders.updateOrder({ orderId, note: "late" }, { ...alice, timeoutMs: 500 }),
            ],
            ["a cancel", (orderId: bigint) => mesh.orders.cancelOrder({ orderId }, { ...alice, timeoutMs: 500 })],
          ] as const) {
            const order = await newOrder();
            await holder.query("BEGIN");
            await holder.query(`SELECT id FROM ${mesh.ordersSchema}.orders WHERE id = $1 FOR UPDATE`, [order.id]);
            const started = Date.now();
            expect((await failure(change(order.id))).code, what).to.equal(Code.DeadlineExceeded);
            expect(Date.now() - started, what).to.be.below(2_000);
            await sleep(300);
            const { rows } = await holder.query<{ n: string }>(
              `SELECT count(*) AS n FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))`,
            );
            await holder.query("ROLLBACK");
            expect(Number(rows[0]!.n), `${what}: nothing still waits for the lock`).to.equal(0);
            const { order: after } = await mesh.orders.getOrder({ orderId: order.id }, alice);
            expect(after!.status, what).to.equal(OrderStatus.PENDING);
            expect(after!.note, what).to.equal(order.note);
          }
        } finally {
          await holder.query("ROLLBACK").catch(() => undefined);
          await holder.end();
        }
      });

    it("refuses an update that writes status, naming the actions", async () => {
      const order = await newOrder();
      const refused = await failure(mesh.orders.updateOrder({ orderId: order.id, status: "cancelled" }, alice));
      expect(refused.reason).to.equal("RULE_VIOLATION");
      expect(refused.message).to.include("cancel");
      const patched = await mesh.orders.updateOrder({ orderId: order.id, note: "leave at the door" }, alice);
      expect(patched.order!.note).to.equal("leave at the door");
      expect(patched.order!.status).to.equal(OrderStatus.PENDING);
    });

    it("holds at most 100 discounts, like items, so that an order's answer stays bounded", async () => {
      const order = await newOrder();
      for (let i = 0; i < 100; i++)
        await mesh.orders.addDiscount({ orderId: order.id, code: `D${i}`, amount: 1n }, alice);
      const refused = await failure(
        mesh.orders.addDiscount({ orderId: order.id, code: "ONE-MORE", amount: 1n }, alice),
      );
      expect([refused.reason, refused.message]).to.deep.equal([
        "RULE_VIOLATION",
        "an order holds at most 100 discounts",
      ]);
      expect((await mesh.orders.getOrder({ orderId: order.id }, alice)).order!.discounts).to.have.length(100);
    });

    it("keeps another tenant's orders invisible", async () => {
      const order = await newOrder();
      expect((await failure(mesh.orders.getOrder({ orderId: order.id }, carol))).code).to.equal(Code.NotFound);
      expect((await failure(mesh.orders.cancelOrder({ orderId: order.id }, carol))).code).to.equal(Code.NotFound);
    });

    it("lists a user's orders by keyset across inserts: no duplicate, no gap", async () => {
      const existing: bigint[] = [];
      for (let i = 0; i < 7; i++) existing.push((await newOrder(BigInt(1 + i))).id);
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

    it("prices items from the catalog: a matching price is taken, another is PRICE_CHANGED with the current one, unknown skus and other currencies 422", async () => {
      const order = (
        await mesh.orders.createOrder(
          {
            currency: "EUR",
            items: [
              { sku: "MUG-1", quantity: 2n, expectedUnitPrice: 900n },
              { sku: "STICKER-1", quantity: 1n },
            ],
          },
          alice,
        )
      ).order!;
      expect(order.items.map((i) => [i.sku, i.unitPrice])).to.deep.equal([
        ["MUG-1", 900n],
        ["STICKER-1", 300n],
      ]);
      expect(order.total).to.equal(2100n);
      const changed = await mesh.orders
        .createOrder({ currency: "EUR", items: [{ sku: "MUG-1", quantity: 1n, expectedUnitPrice: 1n }] }, alice)
        .then(
          () => undefined,
          (e: unknown) => e as ConnectError,
        );
      expect(changed?.code).to.equal(Code.FailedPrecondition);
      expect(errorInfoOf(changed!)?.reason).to.equal("PRICE_CHANGED");
      expect(errorInfoOf(changed!)?.metadata).to.deep.equal({ sku: "MUG-1", unit_price: "900", currency: "EUR" });
      expect(
        (
          await failure(
            mesh.orders.createOrder({ currency: "EUR", items: [{ sku: "NO-SUCH-SKU", quantity: 1n }] }, alice),
          )
        ).reason,
      ).to.equal("UNKNOWN_SKU");
      expect(
        (await failure(mesh.orders.createOrder({ currency: "USD", items: [{ sku: "MUG-1", quantity: 1n }] }, alice)))
          .reason,
      ).to.equal("CURRENCY_MISMATCH");
      expect(
        (
          await failure(
            mesh.orders.addItem(
              { orderId: order.id, item: { sku: "PEN-1", quantity: 1n, expectedUnitPrice: 2499n } },
              alice,
            ),
          )
        ).reason,
      ).to.equal("PRICE_CHANGED");
      expect(
        (await mesh.orders.getOrder({ orderId: order.id }, alice)).order!.items,
        "nothing refused was stored",
      ).to.have.length(2);
    });

    it("replays a create with the same key even after the catalog price moved", async () => {
      const sku = `SKU-${randomUUID().slice(0, 8)}`;
      const importOne = (price: bigint) =>
        mesh.content.importItems(
          (async function* () {
            yield { item: { sku, name: "A thing", price, currency: "EUR" } };
          })(),
          alice,
        );
      await importOne(700n);
      const key = randomUUID();
      const request = { idempotencyKey: key, currency: "EUR", items: [{ sku, quantity: 1n }] };
      const first = await mesh.orders.createOrder(request, alice);
      expect(first.order!.total).to.equal(700n);
      await importOne(800n);
      const again = await mesh.orders.createOrder(request, alice);
      expect(again.replayed).to.equal(true);
      expect(again.order!.id).to.equal(first.order!.id);
      expect(again.order!.total).to.equal(700n);
      expect(
        (await mesh.orders.createOrder({ ...request, idempotencyKey: randomUUID() }, alice)).order!.total,
      ).to.equal(800n);
    });

    describe("who may do what", () => {
      let bob: Auth;
      let dora: Auth;
      let doraId: bigint;
      before(async () => {
        bob = { headers: await mesh.login("bob@acme.test") };
        const email = `dora-${randomUUID().slice(0, 8)}@acme.test`;
        doraId = (
          await mesh.identity.createUser(
            { tenantId: "acme", email, fullName: "Dora", password: "dora-password-123", role: Role.MEMBER },
            alice,
          )
        ).user!.id;
        const session = await mesh.identity.createSession({ tenantId: "acme", email, password: "dora-password-123" });
        dora = { headers: { authorization: `Bearer ${session.accessToken}` } };
      });

      it("a member acts on their own order: pays it for themselves, reads the payment, cancels it and gets the refund — but cannot refund directly", async () => {
        const order = await newOrder(1n, bob);
        const paid = await mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, bob);
        const { payment } = await mesh.payments.getPayment({ paymentId: paid.paymentId }, bob);
        expect(payment!.ownerUserId).to.equal(order.userId);
        expect(
          (
            await failure(
              mesh.payments.createRefund({ idempotencyKey: randomUUID(), paymentId: paid.paymentId, amount: 1n }, bob),
            )
          ).reason,
        ).to.equal("ROLE_REQUIRED");
        const cancelled = await mesh.orders.cancelOrder({ orderId: order.id }, bob);
        expect(cancelled.order!.status).to.equal(OrderStatus.CANCELLED);
        expect((await mesh.payments.getPayment({ paymentId: paid.paymentId }, bob)).payment!.amountRefunded).to.equal(
          1500n,
        );
      });

      it("another member's order and payment are not found; shipping, discounting and others' lists are the admin's", async () => {
        const order = await newOrder(1n, bob);
        for (const call of [
          () => mesh.orders.getOrder({ orderId: order.id }, dora),
          () => mesh.orders.updateOrder({ orderId: order.id, note: "mine now" }, dora),
          () => mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, dora),
          () => mesh.orders.cancelOrder({ orderId: order.id }, dora),
          () => mesh.orders.addItem({ orderId: order.id, item: { sku: "MUG-1", quantity: 1n } }, dora),
          () => mesh.orders.listItems({ orderId: order.id }, dora),
          () => mesh.orders.listDiscounts({ orderId: order.id }, dora),
        ]) {
          expect(await failure(call())).to.deep.include({ code: Code.NotFound, reason: "NOT_FOUND" });
        }
        expect(
          (await failure(mesh.orders.addDiscount({ orderId: order.id, code: "X", amount: 1n }, bob))).reason,
        ).to.equal("ROLE_REQUIRED");
        expect((await failure(mesh.orders.listUserOrders({ userId: 1n }, bob))).reason).to.equal("ROLE_REQUIRED");
        const paid = await mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, alice);
        expect((await failure(mesh.orders.shipOrder({ orderId: order.id }, bob))).reason).to.equal("ROLE_REQUIRED");
        expect((await failure(mesh.payments.getPayment({ paymentId: paid.paymentId }, dora))).reason).to.equal(
          "NOT_FOUND",
        );
        expect((await mesh.payments.listPayments({ pageSize: 100 }, dora)).payments.map((p) => p.id)).to.not.include(
          paid.paymentId,
        );
        expect(
          (await mesh.payments.getPayment({ paymentId: paid.paymentId }, bob)).payment!.ownerUserId,
          "an admin paid it, for its owner",
        ).to.equal(order.userId);
        expect((await mesh.orders.shipOrder({ orderId: order.id }, alice)).order!.status).to.equal(OrderStatus.SHIPPED);
      });

      it("keeps each user's Idempotency-Keys their own, on orders and payments: another's key is another key", async () => {
        const key = randomUUID();
        const request = { idempotencyKey: key, currency: "EUR", items: [{ sku: "MUG-1", quantity: 1n }] };
        const bobs = (await mesh.orders.createOrder(request, bob)).order!;
        expect((await mesh.orders.createOrder(request, bob)).order!.id).to.equal(bobs.id);
        // Neither a refusal that tells the key is used nor bob's order: a first create of dora's own.
        const doras = await mesh.orders.createOrder(request, dora);
        expect([doras.replayed, doras.order!.userId]).to.deep.equal([false, doraId]);
        expect(
          (await mesh.orders.createOrder({ ...request, note: "another body" }, alice)).replayed,
          "not even an admin's key meets bob's",
        ).to.equal(false);
        const payment = { idempotencyKey: randomUUID(), amount: 77n, currency: "EUR", source: "tok_visa" };
        const bobsPayment = (await mesh.payments.createPayment(payment, bob)).payment!;
        const dorasPayment = await mesh.payments.createPayment({ ...payment, amount: 78n }, dora);
        expect([dorasPayment.replayed, dorasPayment.payment!.id === bobsPayment.id]).to.deep.equal([false, false]);
        expect((await mesh.payments.createPayment(payment, bob)).payment!.id, "bob's key still replays his").to.equal(
          bobsPayment.id,
        );
      });

      it("refuses a payment reference or another owner from anyone but an internal service or an admin", async () => {
        const make = (auth: Auth, extra: object) =>
          mesh.payments.createPayment(
            { idempotencyKey: randomUUID(), amount: 5n, currency: "EUR", source: "tok_visa", ...extra },
            auth,
          );
        expect((await failure(make(bob, { reference: "order:1" }))).reason).to.equal("ROLE_REQUIRED");
        expect((await failure(make(bob, { ownerUserId: 1n }))).reason).to.equal("ROLE_REQUIRED");
        expect((await make(alice, { ownerUserId: 2n })).payment!.ownerUserId).to.equal(2n);
      });
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
          for await (const event of client.trackOrders(follows, {
            signal: controller.signal,
            headers: alice.headers,
          })) {
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
      expect(seen).to.deep.equal([
        `${order.id}:PENDING`,
        "999999999:UNSPECIFIED",
        `${order.id}:PAID`,
        `${order.id}:SHIPPED`,
      ]);
      // The same HTTP/2 connection still carries other calls.
      expect((await client.getOrder({ orderId: order.id }, { headers: alice.headers })).order!.status).to.equal(
        OrderStatus.SHIPPED,
      );
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
    // A payments stand-in that is slow, and records whether the caller's deadline reached it. It
    // cannot tell what happened under a key either, so no step it leaves is settled.
    const impl: Partial<ServiceImpl<typeof PaymentService>> = {
      async createPayment(_req, ctx) {
        await sleep(3_000, undefined, { signal: ctx.signal }).catch(() => {});
        observed.push({ aborted: ctx.signal.aborted });
        throw new ConnectError("too late", Code.Internal);
      },
    };
    slowPayments = await startGrpcServer({
      name: "slow-payments",
      host: "127.0.0.1",
      port: 0,
      services: [registration(PaymentService, impl as ServiceImpl<typeof PaymentService>)],
      logger: createLogger("test", "silent"),
    });
    mesh = await startInProcessMesh({ paymentsAddressForOrders: `127.0.0.1:${slowPayments.port}` });
    alice = { headers: await mesh.login("alice@acme.test") };
  });
  after(async () => {
    await mesh?.stop();
    if (mode === "slow") await slowPayments?.shutdown();
  });

  const newOrder = async () =>
    (await mesh.orders.createOrder({ currency: "EUR", items: [{ sku: "STICKER-1", quantity: 1n }] }, alice)).order!;

  it("ends the downstream call when the caller's deadline expires mid-chain; the order keeps its status, its payment step unsettled", async () => {
    const order = await newOrder();
    const started = Date.now();
    const err = await failure(
      mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, { ...alice, timeoutMs: 400 }),
    );
    expect(err.code).to.equal(Code.DeadlineExceeded);
    expect(Date.now() - started).to.be.lessThan(1_500);
    for (let i = 0; i < 50 && observed.length === 0; i++) await sleep(20);
    expect(observed[0], "payments saw its call cancelled well before its 3 s work").to.deep.equal({ aborted: true });
    const now = (await mesh.orders.getOrder({ orderId: order.id }, alice)).order!;
    expect(now.status).to.equal(OrderStatus.PENDING);
    expect(now.stepInProgress, "nobody could tell what happened: the step waits for payments to answer").to.equal(
      OrderStep.PAYMENT,
    );
    const refused = await failure(mesh.orders.updateOrder({ orderId: order.id, note: "x" }, alice));
    expect(refused.reason).to.equal("STEP_IN_PROGRESS");
    expect(refused.message).to.include("payment");
  });

  it("answers UPSTREAM_UNREACHABLE within the deadline when payments is down (waiting for it), and settles the never-sent charge at once: the order as it was", async () => {
    mode = "down";
    await slowPayments.shutdown();
    const order = await newOrder();
    const started = Date.now();
    const err = await failure(
      mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, { ...alice, timeoutMs: 1_500 }),
    );
    expect([Code[err.code], err.reason]).to.deep.equal(["Unavailable", "UPSTREAM_UNREACHABLE"]);
    expect(Date.now() - started, "answered within the caller's deadline").to.be.lessThan(1_500);
    const now = (await mesh.orders.getOrder({ orderId: order.id }, alice)).order!;
    expect([now.status, now.stepInProgress]).to.deep.equal([OrderStatus.PENDING, OrderStep.UNSPECIFIED]);
  });
});

for (const engine of serviceEngines()) {
  describe(`orders money steps under faults (${engine.name})`, function () {
    this.timeout(60_000);
    const RECONCILE_MS = 300;

    async function paymentsOf(mesh: InProcessMesh, auth: Auth, orderId: bigint) {
      const all = await mesh.payments.listPayments({ pageSize: 100 }, auth);
      return all.payments.filter((p) => p.reference === `order:${orderId}`);
    }

    async function until<T>(
      read: () => Promise<T>,
      done: (value: T) => boolean,
      what: string,
      ms = 10_000,
    ): Promise<T> {
      const end = Date.now() + ms;
      let value = await read();
      while (!done(value) && Date.now() < end) {
        await sleep(50);
        value = await read();
      }
      expect(done(value), what).to.equal(true);
      return value;
    }

    describe("content (the catalog) taken away", () => {
      let mesh: InProcessMesh;
      let alice: Auth;
      before(async () => {
        mesh = await startInProcessMesh({ databaseUrl: engine.databaseUrl, gateContent: true });
        alice = { headers: await mesh.login("alice@acme.test") };
      });
      after(async () => mesh?.stop());

      it("answers UPSTREAM_UNREACHABLE within the deadline when the catalog cannot be reached, and stores nothing; works again when it is back", async () => {
        const before = (await mesh.orders.listUserOrders({ userId: 1n, pageSize: 100 }, alice)).orders.length;
        mesh.contentGate!.shut();
        try {
          const started = Date.now();
          const err = await failure(
            mesh.orders.createOrder(
              { currency: "EUR", items: [{ sku: "MUG-1", quantity: 1n }] },
              { ...alice, timeoutMs: 1_500 },
            ),
          );
          expect([Code[err.code], err.reason]).to.deep.equal(["Unavailable", "UPSTREAM_UNREACHABLE"]);
          expect(Date.now() - started, "answered within the caller's deadline").to.be.lessThan(1_500);
          const orders = (await mesh.orders.listUserOrders({ userId: 1n, pageSize: 100 }, alice)).orders;
          expect(orders.length, "nothing stored").to.equal(before);
        } finally {
          mesh.contentGate!.reopen();
        }
        const created = await until(
          () =>
            mesh.orders.createOrder({ currency: "EUR", items: [{ sku: "MUG-1", quantity: 1n }] }, alice).then(
              (r) => r.order,
              () => undefined,
            ),
          (o) => o !== undefined,
          "the catalog answers again",
        );
        expect(created!.total).to.equal(900n);
      });

      it("answers DEADLINE_EXCEEDED when the catalog hangs past the caller's deadline, and stores nothing", async () => {
        const before = (await mesh.orders.listUserOrders({ userId: 1n, pageSize: 100 }, alice)).orders.length;
        mesh.contentGate!.stall();
        try {
          const started = Date.now();
          expect(
            (
              await failure(
                mesh.orders.createOrder(
                  { currency: "EUR", items: [{ sku: "MUG-1", quantity: 1n }] },
                  { ...alice, timeoutMs: 500 },
                ),
              )
            ).code,
          ).to.equal(Code.DeadlineExceeded);
          expect(Date.now() - started).to.be.lessThan(1_500);
        } finally {
          mesh.contentGate!.reopen();
        }
        expect(
          (await mesh.orders.listUserOrders({ userId: 1n, pageSize: 100 }, alice)).orders.length,
          "nothing stored",
        ).to.equal(before);
      });

      it("adds no item when the catalog cannot be reached", async () => {
        const order = (
          await mesh.orders.createOrder({ currency: "EUR", items: [{ sku: "MUG-1", quantity: 1n }] }, alice)
        ).order!;
        mesh.contentGate!.shut();
        try {
          expect(
            (
              await failure(
                mesh.orders.addItem(
                  { orderId: order.id, item: { sku: "PEN-1", quantity: 1n } },
                  { ...alice, timeoutMs: 1_500 },
                ),
              )
            ).code,
          ).to.equal(Code.Unavailable);
        } finally {
          mesh.contentGate!.reopen();
        }
        expect((await mesh.orders.getOrder({ orderId: order.id }, alice)).order!.items).to.have.length(1);
      });
    });

    describe("payments taken away and given back", () => {
      let mesh: InProcessMesh;
      let alice: Auth;
      before(async () => {
        mesh = await startInProcessMesh({
          databaseUrl: engine.databaseUrl,
          gatePayments: true,
          ordersEnv: { ORDERS_RECONCILE_INTERVAL_MS: String(RECONCILE_MS) },
        });
        alice = { headers: await mesh.login("alice@acme.test") };
      });
      after(async () => mesh?.stop());

      it("keeps a pay whose outcome is unknown unsettled — refusing edits, a second pay and a cancel — until the reconciler settles it; then a new attempt charges once", async () => {
        const order = (
          await mesh.orders.createOrder({ currency: "EUR", items: [{ sku: "PEN-1", quantity: 1n }] }, alice)
        ).order!;
        // The charge is sent into a connection that holds it, then the connection is cut: nobody can tell
        // whether payments got it. (The connection is made first: a stalled one never completes its handshake,
        // and a call that waits for it is never sent.)
        const warm = await mesh.orders.createOrder({ currency: "EUR", items: [{ sku: "PEN-1", quantity: 1n }] }, alice);
        await mesh.orders.payOrder({ orderId: warm.order!.id, source: "tok_visa" }, alice);
        mesh.paymentsGate!.stall();
        const paying = failure(
          mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, { ...alice, timeoutMs: 2_000 }),
        );
        await sleep(300);
        mesh.paymentsGate!.shut();
        expect((await paying).code).to.equal(Code.Unavailable);
        const stuck = (await mesh.orders.getOrder({ orderId: order.id }, alice)).order!;
        expect([stuck.status, stuck.stepInProgress]).to.deep.equal([OrderStatus.PENDING, OrderStep.PAYMENT]);
        for (const call of [
          () => mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, alice),
          () => mesh.orders.cancelOrder({ orderId: order.id }, alice),
          () => mesh.orders.addItem({ orderId: order.id, item: { sku: "MUG-1", quantity: 1n } }, alice),
          () => mesh.orders.addDiscount({ orderId: order.id, code: "X", amount: 1n }, alice),
        ]) {
          expect(await failure(call())).to.deep.include({ code: Code.FailedPrecondition, reason: "STEP_IN_PROGRESS" });
        }
        mesh.paymentsGate!.reopen();
        const settled = await until(
          () => mesh.orders.getOrder({ orderId: order.id }, alice).then((r) => r.order!),
          (o) => o.stepInProgress === OrderStep.UNSPECIFIED,
          "the reconciler settled the step",
        );
        expect(settled.status, "nothing was charged under the key: rolled back").to.equal(OrderStatus.PENDING);
        expect(await paymentsOf(mesh, alice, order.id)).to.have.length(0);
        const paid = await mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, alice);
        expect(paid.order!.status).to.equal(OrderStatus.PAID);
        expect((await paymentsOf(mesh, alice, order.id)).map((p) => p.amount)).to.deep.equal([2500n]);
      });

      it("a pay that could not reach payments at all is settled at once as nothing moved: the order as it was, a new pay charges once", async () => {
        const order = (
          await mesh.orders.createOrder({ currency: "EUR", items: [{ sku: "PEN-1", quantity: 1n }] }, alice)
        ).order!;
        mesh.paymentsGate!.shut();
        // Once orders' channel has seen its connection go (a call picked onto a connection dying under
        // it was sent, for all anyone knows: that one is the reconciler's, above).
        await sleep(200);
        try {
          const err = await failure(
            mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, { ...alice, timeoutMs: 1_000 }),
          );
          expect([Code[err.code], err.reason]).to.deep.equal(["Unavailable", "UPSTREAM_UNREACHABLE"]);
          const now = (await mesh.orders.getOrder({ orderId: order.id }, alice)).order!;
          expect([now.status, now.stepInProgress]).to.deep.equal([OrderStatus.PENDING, OrderStep.UNSPECIFIED]);
        } finally {
          mesh.paymentsGate!.reopen();
        }
        const paid = await mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, alice);
        expect(paid.order!.status).to.equal(OrderStatus.PAID);
        expect((await paymentsOf(mesh, alice, order.id)).map((p) => p.amount)).to.deep.equal([2500n]);
      });

      it("cuts the connection while a refund is in flight: the order stays paid until settled, then is cancelled with the charge refunded exactly once", async () => {
        const order = (
          await mesh.orders.createOrder({ currency: "EUR", items: [{ sku: "MUG-1", quantity: 1n }] }, alice)
        ).order!;
        const { paymentId } = await mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, alice);
        mesh.paymentsGate!.stall();
        const cancelling = failure(mesh.orders.cancelOrder({ orderId: order.id }, { ...alice, timeoutMs: 2_000 }));
        await sleep(300);
        mesh.paymentsGate!.shut();
        expect((await cancelling).code).to.equal(Code.Unavailable);
        const stuck = (await mesh.orders.getOrder({ orderId: order.id }, alice)).order!;
        expect([stuck.status, stuck.stepInProgress]).to.deep.equal([OrderStatus.PAID, OrderStep.CANCELLATION]);
        expect(await failure(mesh.orders.shipOrder({ orderId: order.id }, alice))).to.deep.include({
          reason: "STEP_IN_PROGRESS",
        });
        mesh.paymentsGate!.reopen();
        await until(
          () => mesh.orders.getOrder({ orderId: order.id }, alice).then((r) => r.order!),
          (o) => o.stepInProgress === OrderStep.UNSPECIFIED,
          "the reconciler settled the step",
        );
        const cancelled = await mesh.orders.cancelOrder({ orderId: order.id }, alice);
        expect(cancelled.order!.status).to.equal(OrderStatus.CANCELLED);
        const { refunds } = await mesh.payments.listRefunds({ paymentId }, alice);
        expect(refunds.map((r) => r.amount)).to.deep.equal([900n]);
      });
    });

    /** A mesh whose payments always stalls for 1.5 s at this point of a charge or refund. */
    function withPaymentsStalled(point: "hold-before-commit" | "hold-after-commit") {
      const ctx = { mesh: undefined as unknown as InProcessMesh, alice: undefined as unknown as Auth };
      before(async () => {
        ctx.mesh = await startInProcessMesh({
          databaseUrl: engine.databaseUrl,
          paymentsEnv: { NODE_ENV: "test", FAULTS: `payments.${point}=1:1500` },
          ordersEnv: { ORDERS_RECONCILE_INTERVAL_MS: String(RECONCILE_MS) },
        });
        ctx.alice = { headers: await ctx.mesh.login("alice@acme.test") };
      });
      after(async () => ctx.mesh?.stop());
      return ctx;
    }

    describe("payments stalled before it commits", () => {
      const stalled = withPaymentsStalled("hold-before-commit");

      it("settles the pay as not done as soon as the deadline passes, and the late charge is refused: no money moves", async () => {
        const { mesh, alice } = stalled;
        const order = (
          await mesh.orders.createOrder({ currency: "EUR", items: [{ sku: "SHIRT-1", quantity: 1n }] }, alice)
        ).order!;
        expect(
          (await failure(mesh.orders.payOrder({ orderId: order.id, source: "tok_visa" }, { ...alice, timeoutMs: 400 })))
            .code,
        ).to.equal(Code.DeadlineExceeded);
        const settled = await until(
          () => mesh.orders.getOrder({ orderId: order.id }, alice).then((r) => r.order!),
          (o) => o.stepInProgress === OrderStep.UNSPECIFIED,
          "settled",
        );
        expect(settled.status).to.equal(OrderStatus.PENDING);
        await sleep(1_800); // the stalled charge wakes, finds its key void, and charges nothing
        expect(await paymentsOf(mesh, alice, order.id)).to.have.length(0);
      });
    });

    describe("payments stalled after it commits", () => {
      const stalled = withPaymentsStalled("hold-after-commit");

      it("settles a pay whose answer never came as paid, with its one charge", async () => {
        const { mesh, alice } = stalled;
        const order = (
          await mesh.orders.createOrder({ currency: "EUR", items: [{ sku: "SHIRT-1", quantity: 2n }] }, alice)
        ).order!;
        // Orders' call to payments ends at its own deadline, a little before the caller's: asking payments
        // what became of the key then may still answer in time (paid), else the caller's deadline passes (504).
        const answer = await mesh.orders
          .payOrder({ orderId: order.id, source: "tok_visa" }, { ...alice, timeoutMs: 400 })
          .then(
            (r) => OrderStatus[r.order!.status],
            (err: unknown) => Code[ConnectError.from(err).code],
          );
        expect(["PAID", "DeadlineExceeded"]).to.include(answer);
        const paid = await until(
          () => mesh.orders.getOrder({ orderId: order.id }, alice).then((r) => r.order!),
          (o) => o.status === OrderStatus.PAID,
          "paid",
        );
        expect(paid.stepInProgress).to.equal(OrderStep.UNSPECIFIED);
        const charges = await paymentsOf(mesh, alice, order.id);
        expect(charges.map((p) => [p.id, p.amount])).to.deep.equal([[paid.paymentId, 3800n]]);
      });
    });
  });
}
