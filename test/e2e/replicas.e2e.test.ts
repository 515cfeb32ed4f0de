// Several replicas of a service behind one address, as a Deployment with a headless Service gives:
// the peers' channels balance calls round robin over them, retry a read that met a replica going away,
// and every replica sees what any other one changed. Two payments and two orders processes share one
// PostgreSQL server (embedded storage is one process's own), so this file needs DATABASE_URL. The
// gateway runs its DEFAULT adaptive concurrency limit: a replica going away under load is not an
// overload, and costs no shed answer either.
import { expect } from "chai";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { create } from "@bufbuild/protobuf";
import {
  OrderService,
  OrderStatus,
  TrackOrdersRequestSchema,
  type TrackOrdersRequest,
} from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { createServiceClient, openChannel } from "@switchyard/platform/grpc";
import { ALICE, DEMO_PASSWORD, newKey, startE2eMeshOnServer, type ServerE2eMesh } from "../support/http.js";

describe("e2e: replicas (two payments, two orders) on one PostgreSQL server", function () {
  this.timeout(120_000);
  const url = process.env.DATABASE_URL;
  let env: ServerE2eMesh;
  let token = "";
  let paymentId = "";

  before(async function () {
    if (!url) {
      console.log("  (replicas suite skipped: DATABASE_URL is not set — replicas share a PostgreSQL server)");
      return this.skip();
    }
    env = await startE2eMeshOnServer("replicas", url, {
      replicas: { payments: 2, orders: 2 },
      // Every answered call is logged at debug level: which replica served it.
      envFor: {
        payments: { LOG_LEVEL: "debug" },
        gateway: { GATEWAY_CONCURRENCY_INITIAL: "100", GATEWAY_CONCURRENCY_MIN: "3", GATEWAY_CONCURRENCY_MAX: "1000" },
      },
    });
    const login = await env.api.post(`/v1/tenants/${ALICE.tenant}/sessions`, {
      json: { email: ALICE.email, password: DEMO_PASSWORD },
    });
    expect(login.status, login.text).to.equal(201);
    token = login.json.access_token as string;
    const payment = await env.api.post("/v1/payments", {
      token,
      key: newKey(),
      json: { amount: 700, currency: "EUR", source: "tok_replicas" },
    });
    expect(payment.status, payment.text).to.equal(201);
    paymentId = payment.json.id as string;
  });

  after(async () => {
    await env?.stop();
  });

  /** GetPayment calls each payments replica has answered so far. */
  const answeredBy = () =>
    [0, 1].map(
      (r) =>
        env.mesh
          .logsOf("payments", r)
          .join("")
          .split("\n")
          .filter((l) => l.includes('"rpc answered"') && l.includes("PaymentService/GetPayment")).length,
    );

  async function spreadOf(calls: number): Promise<number[]> {
    const before = answeredBy();
    for (let i = 0; i < calls; i++) {
      const res = await env.api.get(`/v1/payments/${paymentId}`, { token });
      expect(res.status, res.text).to.equal(200);
    }
    let counts = answeredBy().map((n, r) => n - before[r]!);
    for (const until = Date.now() + 2_000; counts[0]! + counts[1]! < calls && Date.now() < until; await sleep(20))
      counts = answeredBy().map((n, r) => n - before[r]!);
    expect(counts[0]! + counts[1]!, "every call was answered by one of the two").to.equal(calls);
    return counts;
  }

  /** Reads from `clients` at once for `ms`, doing `during` after a third of it; every status seen. */
  async function readUnderLoad(ms: number, during: () => Promise<void>, clients = 6): Promise<Map<number, number>> {
    const statuses = new Map<number, number>();
    const until = Date.now() + ms;
    const client = async () => {
      while (Date.now() < until) {
        const res = await env.api.get(`/v1/payments/${paymentId}`, { token });
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      }
    };
    const reading = Promise.all(Array.from({ length: clients }, client));
    await sleep(ms / 3);
    await during();
    await reading;
    return statuses;
  }

  it("spreads the gateway's reads over both payments replicas, each taking at least 30 %", async () => {
    const [a, b] = await spreadOf(200);
    expect(a, `replica 0 answered ${a} of 200`).to.be.at.least(60);
    expect(b, `replica 1 answered ${b} of 200`).to.be.at.least(60);
  });

  it("fails no read while a payments replica is killed under 48 readers (SIGKILL: calls on it are retried on the other), and piles no retries onto the survivor", async () => {
    const survivorBefore = answeredBy()[0]!;
    const statuses = await readUnderLoad(3_000, () => env.mesh.stopService("payments", "SIGKILL", 1), 48);
    expect([...statuses.keys()], JSON.stringify(Object.fromEntries(statuses))).to.deep.equal([200]);
    const sent = statuses.get(200)!;
    expect(sent).to.be.above(50);
    // Retries stay within the budget (issue 46): a read reaches the survivor at most once, whether sent
    // there first or tried again after the killed replica dropped it.
    const survivor = answeredBy()[0]! - survivorBefore;
    expect(survivor, "the survivor answered reads").to.be.above(0);
    expect(survivor, `calls the survivor answered, for ${sent} reads`).to.be.at.most(sent);
  });

  it("sends the restarted replica its share again", async () => {
    await env.mesh.restartService("payments", 1);
    // The channel reconnects with backoff (at most 2 s): wait for it by the clock, not by a number of
    // reads — ten rounds of 50 reads once took less time than the reconnect (the last round caught it half-way).
    let counts = [0, 0];
    for (const until = Date.now() + 10_000; counts[1]! < 15 && Date.now() < until;) counts = await spreadOf(50);
    expect(counts[1], "the restarted replica serves again").to.be.at.least(15);
  });

  it("fails no read while a payments replica stops gracefully under load (SIGTERM)", async () => {
    const statuses = await readUnderLoad(3_000, () => env.mesh.stopService("payments", "SIGTERM", 0));
    expect([...statuses.keys()], JSON.stringify(Object.fromEntries(statuses))).to.deep.equal([200]);
    await env.mesh.restartService("payments", 0);
  });

  it("streams a status change made on one orders replica to a TrackOrders stream on the other", async () => {
    const [first, second] = env.mesh.replicaPorts.orders.map((port) => openChannel(`127.0.0.1:${port}`));
    const auth = { authorization: `Bearer ${token}` };
    const controller = new AbortController();
    try {
      const onSecond = createServiceClient(OrderService, second!);
      const created = await onSecond.createOrder(
        { currency: "EUR", items: [{ sku: "PEN-1", quantity: 1n }], idempotencyKey: newKey() },
        { headers: auth, timeoutMs: 5_000 },
      );
      const orderId = created.order!.id;
      const follows = (async function* (): AsyncGenerator<TrackOrdersRequest> {
        yield create(TrackOrdersRequestSchema, { action: { case: "followOrderId", value: orderId } });
        await sleep(60_000, undefined, { signal: controller.signal }).catch(() => {});
      })();
      const seen: OrderStatus[] = [];
      const tracking = (async () => {
        for await (const event of createServiceClient(OrderService, first!).trackOrders(follows, {
          headers: auth,
          signal: controller.signal,
        })) {
          seen.push(event.status);
          if (seen.length === 1) await onSecond.cancelOrder({ orderId }, { headers: auth, timeoutMs: 5_000 });
          if (event.status === OrderStatus.CANCELLED) return;
        }
      })();
      const outcome = await Promise.race([tracking.then(() => "seen"), sleep(10_000).then(() => "timed out")]);
      expect(outcome, `statuses seen on the other replica: ${seen.map((s) => OrderStatus[s]).join(", ")}`).to.equal(
        "seen",
      );
      expect(seen).to.deep.equal([OrderStatus.PENDING, OrderStatus.CANCELLED]);
    } finally {
      controller.abort();
      first!.close();
      second!.close();
    }
  });

  it("runs the reconciler on one orders replica at a time: one lease, held by one of the two", async () => {
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      const { rows } = await admin.query<{ holder: string }>(
        `SELECT holder FROM ${env.schemaOf("orders")}.leases WHERE name = 'orders.reconciler' AND expires_at > now()`,
      );
      expect(rows.length, "one live reconciler lease").to.equal(1);
      const ports = env.mesh.replicaPorts.orders.map(String);
      expect(ports, `held by ${rows[0]!.holder}`).to.include(rows[0]!.holder.split(":").pop());
    } finally {
      await admin.end();
    }
  });
});
