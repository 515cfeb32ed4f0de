// Money between orders and payments, through the real multi-process mesh, under faults at the worst
// moments: orders dies (SIGKILL, by its test-only fault points) right after recording a step's
// intent, right after payments charged, right after payments refunded; payments stalls past the
// deadline before or after it commits (its fault points), and is killed outright now and then. Many
// orders go through pay, cancel and ship at once; whatever dies is restarted, the reconciler is
// given its interval, and then the invariants are checked by asking both services:
//   - every paid or shipped order has exactly one charge, of its total, and nothing refunded;
//   - every cancelled order that was charged has refunds equal to its charge;
//   - no order that was never paid has a charge, and no charge names an order that does not exist;
//   - no step stays unsettled longer than the reconcile interval plus the step's deadline.
import { expect } from "chai";
import { setTimeout as sleep } from "node:timers/promises";
import {
  ALICE,
  BOB,
  MESH_PROCESSES,
  newKey,
  startE2eMesh,
  type Api,
  type ApiResponse,
  type E2eMesh,
} from "../support/http.js";
import { seededRandom } from "../support/seeded-random.js";

const ORDERS = Number(process.env.MONEY_FAULT_ORDERS ?? 200);
const WORKERS = 6;
const DEADLINE_MS = 1_500;
const RECONCILE_MS = 500;
/** A step may take its call's deadline, plus the slack orders gives itself to record the outcome. */
const STEP_DEADLINE_MS = DEADLINE_MS + 1_000;
const HOLD_MS = 2_500;
const CATALOG: Record<string, number> = {
  "BOOK-1": 1_500,
  "MUG-1": 900,
  "PEN-1": 2_500,
  "SHIRT-1": 1_900,
  "STICKER-1": 300,
};

interface OrderJson {
  id: number;
  user_id: number;
  status: "pending" | "paid" | "shipped" | "cancelled";
  total: number;
  payment_id: string | null;
  refund_id: string | null;
  step_in_progress: string | null;
}

interface PaymentJson {
  id: string;
  amount: number;
  amount_refunded: number;
  reference: string | null;
}

/** What the driver wants an order to end as. */
type Plan = "pending" | "paid" | "shipped" | "cancel-pending" | "cancel-paid";

describe("e2e: money between orders and payments under faults", function () {
  this.timeout(600_000);

  const seed = Number(process.env.MONEY_FAULT_SEED ?? Date.now() % 1_000_000);
  const rand = seededRandom(seed);
  let env: E2eMesh;
  let api: Api;
  const tokens: Record<"alice" | "bob", string> = { alice: "", bob: "" };
  const restarts: Record<string, number> = { orders: 0, payments: 0 };
  const outcomes = new Map<number, Plan>();
  const statuses: Record<number, number> = {};
  const failures: string[] = [];

  before(async function () {
    this.timeout(120_000);
    console.log(`      money faults: seed ${seed} (replay with MONEY_FAULT_SEED=${seed}), ${ORDERS} orders`);
    env = await startE2eMesh("money-faults", {
      envFor: {
        gateway: { GATEWAY_DEADLINE_MS: String(DEADLINE_MS) },
        orders: {
          NODE_ENV: "test",
          // Rates high enough that each point fires in every run of 200 orders (≥ 7 times expected).
          FAULTS: "orders.exit-after-intent=0.03,orders.exit-after-charge=0.05,orders.exit-after-refund=0.12",
          ORDERS_RECONCILE_INTERVAL_MS: String(RECONCILE_MS),
        },
        payments: {
          NODE_ENV: "test",
          FAULTS: `payments.hold-before-commit=0.04:${HOLD_MS},payments.hold-after-commit=0.04:${HOLD_MS}`,
        },
      },
    });
    api = env.api;
    tokens.alice = await api.login(ALICE);
    tokens.bob = await api.login(BOB);
  });

  afterEach(function () {
    // What orders and payments said about the steps, when a check failed: the reconciler logs each one it settles.
    if (this.currentTest?.state !== "failed") return;
    const lines = env.mesh.logs
      .join("")
      .split("\n")
      .filter((l) => /"level":"(warn|error)"|settled an order/.test(l));
    console.log(lines.slice(-60).join("\n"));
  });

  after(async function () {
    this.timeout(60_000);
    for (const name of MESH_PROCESSES) {
      const child = env?.mesh.process(name);
      if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGCONT");
    }
    await env?.stop();
  });

  // --- the driver ------------------------------------------------------------------------------

  /** Restarts orders and payments whenever they are found dead, until stopped. */
  function supervise(): { stop(): Promise<void> } {
    let running = true;
    const restarting = new Map<string, Promise<unknown>>();
    const loop = (async () => {
      while (running) {
        for (const name of ["orders", "payments"] as const) {
          const child = env.mesh.process(name);
          const dead = child.exitCode !== null || child.signalCode !== null;
          if (dead && !restarting.has(name)) {
            restarts[name]!++;
            restarting.set(
              name,
              env.mesh
                .restartService(name)
                // Died again before it was ready (it takes calls as soon as it listens): the next
                // look finds it dead and starts it again. Anything else is a failure.
                .catch((err: unknown) => {
                  if (!String(err).includes(`${name}#0 exited early`))
                    failures.push(`restarting ${name}: ${String(err)}`);
                })
                .finally(() => restarting.delete(name)),
            );
          }
        }
        await sleep(50);
      }
      await Promise.all(restarting.values());
    })();
    return {
      async stop() {
        running = false;
        await loop;
      },
    };
  }

  const count = (status: number) => (statuses[status] = (statuses[status] ?? 0) + 1);

  /** One request, answered or not (a connection cut while orders dies is a retryable failure too). */
  async function send(
    method: "GET" | "POST",
    path: string,
    token: string,
    json?: unknown,
    key?: string,
  ): Promise<ApiResponse | undefined> {
    try {
      const res = await api.request(method, path, {
        token,
        ...(json === undefined ? {} : { json }),
        ...(key ? { key } : {}),
      });
      count(res.status);
      expect(res.status, `${method} ${path} → ${res.status} ${res.text}`).to.not.equal(500);
      return res;
    } catch (err) {
      if (err instanceof Error && err.name === "AssertionError") throw err;
      count(0);
      return undefined;
    }
  }

  /**
   * Repeats an action as a careful client does — after 502/503/504 (or no answer) and while a step
   * is unsettled (409 STEP_IN_PROGRESS) — until it is answered for good. Gives up after a minute.
   */
  async function until(action: () => Promise<ApiResponse | undefined>, what: string): Promise<ApiResponse> {
    const end = Date.now() + 60_000;
    let last: ApiResponse | undefined;
    for (let attempt = 0; Date.now() < end; attempt++) {
      last = await action();
      // 409 IDEMPOTENCY_KEY_VOIDED: the step was settled as "nothing moved" before payments took it — try again.
      const retry =
        !last ||
        last.status >= 502 ||
        last.status === 429 ||
        (last.status === 409 && ["STEP_IN_PROGRESS", "IDEMPOTENCY_KEY_VOIDED"].includes(last.json?.code));
      if (!retry) return last!;
      await sleep(Math.min(1_000, 50 * 2 ** Math.min(attempt, 5)) * (0.5 + rand()));
    }
    throw new Error(`${what}: still not answered for good after a minute (last: ${last?.status} ${last?.text})`);
  }

  async function readOrder(id: number): Promise<OrderJson> {
    const res = await until(() => send("GET", `/v1/orders/${id}`, tokens.alice), `read order ${id}`);
    expect(res.status, res.text).to.equal(200);
    return res.json as OrderJson;
  }

  async function drive(n: number): Promise<void> {
    const who = rand() < 0.5 ? "alice" : "bob";
    const token = tokens[who];
    const skus = Object.keys(CATALOG);
    const items = Array.from({ length: 1 + Math.floor(rand() * 3) }, () => ({
      sku: skus[Math.floor(rand() * skus.length)]!,
      quantity: 1 + Math.floor(rand() * 3),
    }));
    const r = rand();
    const plan: Plan =
      r < 0.1 ? "pending" : r < 0.2 ? "cancel-pending" : r < 0.55 ? "paid" : r < 0.7 ? "shipped" : "cancel-paid";
    const key = newKey();
    const created = await until(
      () => send("POST", "/v1/orders", token, { currency: "EUR", items, note: `money-fault order ${n}` }, key),
      `create order ${n}`,
    );
    expect(created.status, created.text).to.be.oneOf([200, 201]);
    const order = created.json as OrderJson;
    outcomes.set(order.id, plan);
    if (plan === "pending") return;
    if (plan !== "cancel-pending") {
      const paid = await until(
        () => send("POST", `/v1/orders/${order.id}/payment`, token, { source: "tok_visa" }),
        `pay order ${order.id}`,
      );
      // 201: paid now; 409 INVALID_STATE: an earlier attempt's charge was settled as paid after all.
      if (paid.status === 409) expect(paid.json?.code, paid.text).to.equal("INVALID_STATE");
      else expect(paid.status, paid.text).to.equal(201);
      expect((await readOrder(order.id)).status, `order ${order.id} after pay`).to.equal("paid");
    }
    if (plan === "shipped") {
      const shipped = await until(
        () => send("POST", `/v1/orders/${order.id}/shipments`, tokens.alice, {}),
        `ship order ${order.id}`,
      );
      // 409 INVALID_STATE: an earlier attempt shipped it, and its answer was lost (orders died meanwhile).
      if (shipped.status === 409) expect(shipped.json?.code, shipped.text).to.equal("INVALID_STATE");
      else expect(shipped.status, shipped.text).to.equal(201);
      expect((await readOrder(order.id)).status, `order ${order.id} after ship`).to.equal("shipped");
    }
    if (plan === "cancel-pending" || plan === "cancel-paid") {
      const cancelled = await until(
        () => send("POST", `/v1/orders/${order.id}/cancel`, token),
        `cancel order ${order.id}`,
      );
      if (cancelled.status === 409) expect(cancelled.json?.code, cancelled.text).to.equal("INVALID_STATE");
      else expect(cancelled.status, cancelled.text).to.equal(200);
      expect((await readOrder(order.id)).status, `order ${order.id} after cancel`).to.equal("cancelled");
    }
  }

  // --- the run ---------------------------------------------------------------------------------

  it(`drives ${ORDERS} orders through pay, ship and cancel while orders crashes and payments stalls and dies`, async () => {
    const supervisor = supervise();
    let next = 0;
    // payments killed outright twice during the run, at moments the seed picks.
    const kills = [0.3 + rand() * 0.2, 0.6 + rand() * 0.2].map((f) => Math.floor(f * ORDERS));
    try {
      await Promise.all(
        Array.from({ length: WORKERS }, async () => {
          while (next < ORDERS) {
            const n = next++;
            if (kills.includes(n)) await env.mesh.stopService("payments", "SIGKILL");
            await drive(n);
          }
        }),
      );
    } finally {
      await supervisor.stop();
    }
    console.log(
      `      money faults: restarts ${JSON.stringify(restarts)}; answers ${JSON.stringify(statuses)} (0 = connection cut)`,
    );
    expect(failures, "every restart came back").to.deep.equal([]);
    expect(outcomes.size).to.equal(ORDERS);
    const fired = firedFaultPoints();
    console.log(`      money faults: fault points fired ${JSON.stringify(fired)}`);
    for (const point of [
      "orders.exit-after-intent",
      "orders.exit-after-charge",
      "orders.exit-after-refund",
      "payments.hold-before-commit",
      "payments.hold-after-commit",
    ]) {
      expect(fired[point] ?? 0, `${point} fired`).to.be.above(0);
    }
    const crashes = ["orders.exit-after-intent", "orders.exit-after-charge", "orders.exit-after-refund"].reduce(
      (n, p) => n + (fired[p] ?? 0),
      0,
    );
    expect(restarts.orders, "orders came back after every crash").to.equal(crashes);
    expect(restarts.payments, "payments was killed twice and came back").to.equal(2);
  });

  it("settles every step within the reconcile interval plus the step's deadline", async () => {
    const bound = RECONCILE_MS + STEP_DEADLINE_MS;
    const started = Date.now();
    let unsettled: number[] = [];
    while (Date.now() - started <= bound + 1_000) {
      const orders = [
        ...(await listAll("/v1/users/1/orders")),
        ...(await listAll(`/v1/users/${await bobId()}/orders`)),
      ] as OrderJson[];
      unsettled = orders.filter((o) => o.step_in_progress !== null).map((o) => o.id);
      if (unsettled.length === 0) break;
      await sleep(100);
    }
    expect(
      unsettled,
      `orders still settling ${Date.now() - started} ms after the run (bound ${bound} ms)`,
    ).to.deep.equal([]);
  });

  it("has charged every paid or shipped order exactly once, refunded every cancelled charge in full, and charged nothing else", async () => {
    const orders = new Map<number, OrderJson>();
    for (const o of [
      ...(await listAll("/v1/users/1/orders")),
      ...(await listAll(`/v1/users/${await bobId()}/orders`)),
    ] as OrderJson[])
      orders.set(o.id, o);
    const payments = (await listAll("/v1/payments")) as PaymentJson[];
    const charges = new Map<number, PaymentJson[]>();
    for (const p of payments) {
      const match = /^order:(\d+)$/.exec(p.reference ?? "");
      if (!match) continue;
      const id = Number(match[1]);
      expect(orders.has(id), `charge ${p.id} names order ${id}, which does not exist`).to.equal(true);
      charges.set(id, [...(charges.get(id) ?? []), p]);
    }
    const seen: Record<string, number> = {};
    for (const [id, plan] of outcomes) {
      const order = orders.get(id);
      expect(order, `order ${id} is listed`).to.not.equal(undefined);
      const mine = charges.get(id) ?? [];
      const what = `order ${id} (${plan}, now ${order!.status}, total ${order!.total}): charges ${JSON.stringify(mine)}`;
      seen[order!.status] = (seen[order!.status] ?? 0) + 1;
      const expected = {
        pending: "pending",
        paid: "paid",
        shipped: "shipped",
        "cancel-pending": "cancelled",
        "cancel-paid": "cancelled",
      }[plan];
      expect(order!.status, what).to.equal(expected);
      if (order!.status === "paid" || order!.status === "shipped") {
        expect(
          mine.map((p) => [p.id, p.amount, p.amount_refunded]),
          what,
        ).to.deep.equal([[order!.payment_id, order!.total, 0]]);
      } else if (order!.payment_id !== null) {
        expect(order!.status, what).to.equal("cancelled");
        expect(
          mine.map((p) => [p.id, p.amount]),
          what,
        ).to.deep.equal([[order!.payment_id, order!.total]]);
        const refunds = await listAll(`/v1/payments/${order!.payment_id}/refunds`);
        expect(
          refunds.reduce((sum: number, r: { amount: number }) => sum + r.amount, 0),
          `${what}: refunds ${JSON.stringify(refunds)}`,
        ).to.equal(order!.total);
        expect(mine[0]!.amount_refunded, what).to.equal(order!.total);
        expect(
          refunds.map((r: { id: string }) => r.id),
          what,
        ).to.include(order!.refund_id);
      } else {
        expect(mine, `${what}: never paid, so never charged`).to.deep.equal([]);
      }
    }
    console.log(`      money faults: final statuses ${JSON.stringify(seen)}, ${payments.length} payments`);
  });

  // --- reads -----------------------------------------------------------------------------------

  /** How often each fault point fired, from the processes' own logs. */
  function firedFaultPoints(): Record<string, number> {
    const fired: Record<string, number> = {};
    for (const match of env.mesh.logs.join("").matchAll(/"faultPoint":"([a-z.-]+)"/g))
      fired[match[1]!] = (fired[match[1]!] ?? 0) + 1;
    return fired;
  }

  let bob: number | undefined;
  async function bobId(): Promise<number> {
    if (bob === undefined) {
      const res = await until(() => send("GET", "/v1/tenants/acme/users?limit=100", tokens.alice), "list users");
      bob = (res.json.items as { id: number; email: string }[]).find((u) => u.email === BOB.email)!.id;
    }
    return bob;
  }

  async function listAll(path: string): Promise<any[]> {
    const items: unknown[] = [];
    let cursor: string | null = null;
    do {
      const query = new URLSearchParams({ limit: "100", ...(cursor ? { cursor } : {}) });
      const res = await until(() => send("GET", `${path}?${query.toString()}`, tokens.alice), `list ${path}`);
      expect(res.status, res.text).to.equal(200);
      items.push(...(res.json.items as unknown[]));
      cursor = res.json.next_cursor as string | null;
    } while (cursor);
    return items;
  }
});
