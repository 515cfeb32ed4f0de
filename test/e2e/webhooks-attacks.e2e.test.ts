// Issue 45's attacks on delivery, through the real mesh: two webhooks replicas on one PostgreSQL
// server, the retry schedule and the lease compressed by settings (WEBHOOK_RETRY_FIRST_MS and the rest,
// read in main.ts like any other) so that an hour of retries takes seconds. A receiver answering 500
// "for an hour" is tried on the back-off (each wait within its jitter, a bounded number of attempts)
// while another endpoint's deliveries go on undelayed, and once it recovers the event arrives once more
// and is delivered. The replica holding an attempt killed (SIGKILL) mid-attempt: the other claims the
// delivery once the lease runs out and delivers it. Invariants are read from the API's delivery lists.
import { expect } from "chai";
import type { ServerResponse } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { Webhook } from "standardwebhooks";
import { startReceiver, type TestReceiver } from "../../services/webhooks/test/support/receiver.js";
import { ALICE, newKey, startE2eMeshOnServer, type Api, type ServerE2eMesh } from "../support/http.js";

/** Issue 45's schedule (30 s doubling to 6 h, for 3 days) compressed 200 times: an hour is 18 s. */
const COMPRESSION = 200;
const FIRST_RETRY_MS = 30_000 / COMPRESSION;
const HOUR_MS = 3_600_000 / COMPRESSION;
const LEASE_MS = 3_000;

const idOf = (body: string) => (JSON.parse(body) as { id: string }).id;
const paymentOf = (body: string) => (JSON.parse(body) as { data: { id: string } }).data.id;

describe("e2e: webhook delivery attacked (two replicas, a compressed schedule)", function () {
  this.timeout(120_000);
  const url = process.env.DATABASE_URL;
  let env: ServerE2eMesh;
  let api: Api;
  let alice: string;

  before(async function () {
    this.timeout(120_000);
    if (!url) {
      console.log("  (webhook attacks skipped: DATABASE_URL is not set — the replicas share a PostgreSQL server)");
      return this.skip();
    }
    env = await startE2eMeshOnServer("webhooks-attacks", url, {
      replicas: { webhooks: 2 },
      env: {
        // Two replicas polling every 50 ms on a loaded 2-core machine: an event loop's delay is not this
        // test's subject, so no service sheds on it (the delivery lists read here would be refused).
        SHED_EVENT_LOOP_DELAY_MS: "0",
      },
      envFor: {
        webhooks: {
          WEBHOOK_RETRY_FIRST_MS: String(FIRST_RETRY_MS),
          WEBHOOK_RETRY_LONGEST_MS: String((6 * 3_600_000) / COMPRESSION),
          WEBHOOK_GIVE_UP_AFTER_MS: String((3 * 24 * 3_600_000) / COMPRESSION),
          WEBHOOK_ATTEMPT_TIMEOUT_MS: "2000",
          WEBHOOK_LEASE_MS: String(LEASE_MS),
          WEBHOOK_POLL_MS: "50",
        },
      },
    });
    api = env.api;
    alice = await api.login(ALICE);
  });

  after(async function () {
    this.timeout(60_000);
    await env?.stop();
  });

  const register = async (receiver: TestReceiver) => {
    const made = await api.post("/v2/webhook-endpoints", {
      token: alice,
      key: newKey(),
      json: { url: receiver.url, event_types: ["payment.succeeded"] },
    });
    expect(made.status, made.text).to.equal(201);
    return { id: made.json.id as string, secret: made.json.secret as string };
  };
  const pay = async (amount: number) => {
    const payment = await api.post("/v2/payments", {
      token: alice,
      key: newKey(),
      json: { amount, currency: "EUR", source: "tok_visa" },
    });
    expect(payment.status, payment.text).to.equal(201);
    return payment.json.id as string;
  };
  const deliveryOf = async (endpointId: string, paymentEventId: string) =>
    (await api.listAll(`/v2/webhook-endpoints/${endpointId}/deliveries`, alice)).find(
      (d) => d.event_id === paymentEventId,
    );

  it("a receiver answering 500 for an hour: tried on the back-off, others undelayed, then delivered once more", async function () {
    this.timeout(90_000);
    let recovered = false;
    const flaky = await startReceiver((_req, res) => void res.writeHead(recovered ? 204 : 500).end());
    const good = await startReceiver();
    const endpoints = [await register(flaky), await register(good)];
    try {
      const started = Date.now();
      const first = await pay(500);
      // Through the hour, more payments: each reaches the good endpoint within seconds, whatever the flaky one does.
      const lateness: number[] = [];
      while (Date.now() - started < HOUR_MS - 3_000) {
        await sleep(2_000);
        const made = Date.now();
        const id = await pay(501);
        while (!good.received.some((g) => paymentOf(g.body) === id) && Date.now() - made < 10_000) await sleep(20);
        lateness.push(Date.now() - made);
      }
      expect(lateness.length).to.be.at.least(4);
      for (const ms of lateness) expect(ms, "a payment's event at the good endpoint").to.be.below(2_000);
      while (Date.now() - started < HOUR_MS) await sleep(50);
      recovered = true;
      const recoveredAt = Date.now();

      const mine = () => flaky.received.filter((g) => paymentOf(g.body) === first);
      // The next attempt comes at most a step (≤ 19.2 s here) after the last one of the hour.
      while (Date.now() - recoveredAt < 25_000) {
        const delivered = await deliveryOf(endpoints[0]!.id, idOf(mine()[0]!.body));
        if (delivered?.status === "delivered") break;
        await sleep(200);
      }
      const eventId = idOf(mine()[0]!.body);
      const delivery = await deliveryOf(endpoints[0]!.id, eventId);
      expect(delivery).to.include({ status: "delivered", next_attempt_at: null });
      const attempts = delivery.attempts as { attempted_at: string; status_code: number | null }[];
      const codes = attempts.map((a) => a.status_code);
      expect(codes.slice(0, -1), "every attempt of the hour failed").to.deep.equal(Array(codes.length - 1).fill(500));
      expect(codes.at(-1), "then the one after it").to.equal(204);
      // Bounded: 75 ms to 150 ms after the first, then each wait doubling: 6 to 8 in 18 s, the hour's 7 to 9.
      expect(attempts.length - 1, "attempts while it failed").to.be.within(6, 9);
      const at = attempts.map((a) => Date.parse(a.attempted_at));
      const waits = at.slice(1).map((t, n) => t - at[n]!);
      for (const [n, wait] of waits.entries()) {
        const step = FIRST_RETRY_MS * 2 ** n;
        expect(
          wait,
          `wait ${n + 1}: between half its step and all of it (a second's slack for a loaded machine)`,
        ).to.be.within(step / 2 - 1, step + 1_000);
      }
      // Jittered: the waits are not the steps themselves, nor all the same share of them.
      const shares = waits.map((w, n) => w / (FIRST_RETRY_MS * 2 ** n));
      expect(Math.max(...shares) - Math.min(...shares), "jitter").to.be.above(0.02);
      // The receiver saw each attempt, the same event each time, signed; and it once answered 2xx.
      expect(mine().length).to.equal(attempts.length);
      for (const g of mine()) new Webhook(endpoints[0]!.secret).verify(g.body, g.headers);
      expect(new Set(mine().map((g) => g.headers["webhook-id"]))).to.deep.equal(new Set([eventId]));
      await sleep(500);
      expect(mine().length, "nothing more once delivered").to.equal(attempts.length);
    } finally {
      for (const { id } of endpoints) await api.delete(`/v2/webhook-endpoints/${id}`, { token: alice });
      await Promise.all([flaky.close(), good.close()]);
    }
  });

  it("the replica holding an attempt killed (SIGKILL) mid-attempt: the other claims it after the lease and delivers it", async function () {
    this.timeout(60_000);
    const held: ServerResponse[] = [];
    // The first request of each event is held open (the attempt under way); any later one is answered.
    const seen = new Set<string>();
    const hook = await startReceiver((req, res) => {
      const id = String(req.headers["webhook-id"]);
      if (seen.has(id)) return void res.writeHead(204).end();
      seen.add(id);
      held.push(res);
    });
    const endpoint = await register(hook);
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    let killed: number | undefined;
    try {
      const payment = await pay(777);
      for (let i = 0; i < 200 && hook.received.length === 0; i++) await sleep(25);
      expect(hook.received, "the attempt reached the receiver").to.have.length(1);
      const eventId = hook.received[0]!.headers["webhook-id"]!;
      // Who holds it: the lease names the replica's process (host:pid:…).
      const { rows } = await admin.query<{ lease_holder: string }>(
        `SELECT lease_holder FROM ${env.schemaOf("webhooks")}.deliveries WHERE event_id = $1`,
        [eventId],
      );
      const pid = Number(rows[0]!.lease_holder.split(":")[1]);
      const holder = [0, 1].find((r) => env.mesh.process("webhooks", r).pid === pid);
      expect(holder, `a replica holds the lease (${rows[0]!.lease_holder})`).to.not.equal(undefined);
      const killedAt = Date.now();
      killed = holder;
      await env.mesh.stopService("webhooks", "SIGKILL", holder);
      expect(held, "the attempt was still under way").to.have.length(1);

      for (let i = 0; i < 400 && hook.received.length < 2; i++) await sleep(25);
      const again = Date.now() - killedAt;
      expect(
        hook.received.map((g) => g.headers["webhook-id"]),
        "the event arrived again",
      ).to.deep.equal([eventId, eventId]);
      expect(again, "once the lease ran out, soon after").to.be.within(LEASE_MS - 1_000, LEASE_MS + 5_000);
      for (const g of hook.received) {
        const event = new Webhook(endpoint.secret).verify(g.body, g.headers) as { data: { id: string } };
        expect(event.data.id).to.equal(payment);
      }
      let delivery: any;
      for (let i = 0; i < 100; i++) {
        delivery = await deliveryOf(endpoint.id, eventId);
        if (delivery?.status === "delivered") break;
        await sleep(50);
      }
      // Coherent: the killed attempt left no record (nothing was learnt of it); the one that followed did.
      expect(delivery).to.include({ status: "delivered", next_attempt_at: null });
      expect(delivery.attempts.map((a: { status_code: number }) => a.status_code)).to.deep.equal([204]);
      expect(Date.parse(delivery.attempts[0].attempted_at)).to.be.at.least(killedAt - 50);
      const { rows: after } = await admin.query<{ attempts: number; lease_holder: string | null }>(
        `SELECT attempts, lease_holder FROM ${env.schemaOf("webhooks")}.deliveries WHERE event_id = $1`,
        [eventId],
      );
      expect(after[0]).to.deep.equal({ attempts: 1, lease_holder: null });
      await sleep(LEASE_MS);
      expect(hook.received, "nothing more once delivered").to.have.length(2);
    } finally {
      await admin.end();
      if (killed !== undefined) await env.mesh.restartService("webhooks", killed);
      await api.delete(`/v2/webhook-endpoints/${endpoint.id}`, { token: alice });
      await hook.close();
    }
  });
});
