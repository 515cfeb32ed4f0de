// Issue 45's burst: 10,000 payments made through the API at once (the test client's concurrency
// bounded at 32) — every one's payment.succeeded reaches the partner's receiver, each event id at least
// once, and the endpoint's deliveries, as the API lists them, are all delivered and none failed. A mesh
// of its own on a PostgreSQL server of its own (embedded storage is not what a burst runs on).
// BURST_PAYMENTS=<n> runs fewer, to try it out; the suite (npm run test:faults) runs 10,000.
import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { Webhook } from "standardwebhooks";
import { startPostgresServer, type PostgresServer } from "../../services/platform/test/support/postgres-server.js";
import { startReceiver, type TestReceiver } from "../../services/webhooks/test/support/receiver.js";
import { ALICE, newKey, startE2eMesh, type E2eMesh } from "../support/http.js";

const PAYMENTS = Number(process.env.BURST_PAYMENTS ?? 10_000);
const CLIENT_CONCURRENCY = 32;

describe("faults: a burst of 10,000 payments, every event delivered (a PostgreSQL server of its own)", function () {
  this.timeout(300_000);
  let pg: PostgresServer;
  let env: E2eMesh;
  let hook: TestReceiver;

  before(async function () {
    this.timeout(180_000);
    const server = await startPostgresServer();
    if ("skip" in server) {
      console.log(`  (webhooks burst skipped: ${server.skip})`);
      return this.skip();
    }
    pg = server;
    env = await startE2eMesh("webhooks-burst", {
      env: {
        DATABASE_URL: pg.url,
        SIGNING_KEY_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
        DEMO_DATA_FORCE: "true",
        // The burst's subject is delivery: no payment is shed for the event loop's delay of a loaded machine.
        SHED_EVENT_LOOP_DELAY_MS: "0",
      },
    });
    hook = await startReceiver();
  });

  after(async function () {
    this.timeout(60_000);
    await hook?.close();
    await env?.stop();
    await pg?.destroy();
  });

  it(`delivers every event of ${PAYMENTS} payments made at once, each id at least once, none failed`, async () => {
    const alice = await env.api.login(ALICE);
    const made = await env.api.post("/v2/webhook-endpoints", {
      token: alice,
      key: newKey(),
      json: { url: hook.url, event_types: ["payment.succeeded"] },
    });
    expect(made.status, made.text).to.equal(201);
    const endpointId = made.json.id as string;
    const secret = made.json.secret as string;

    const started = Date.now();
    const paid: string[] = [];
    const refusals: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: CLIENT_CONCURRENCY }, async () => {
        while (next < PAYMENTS) {
          const n = next++;
          const payment = await env.api.post("/v2/payments", {
            token: alice,
            key: newKey(),
            json: { amount: 100 + (n % 1000), currency: "EUR", source: "tok_visa" },
          });
          if (payment.status === 201) paid.push(payment.json.id as string);
          else refusals.push(`${payment.status} ${payment.text}`);
        }
      }),
    );
    const paidMs = Date.now() - started;
    expect(refusals.slice(0, 3), "every payment made").to.deep.equal([]);
    expect(paid).to.have.length(PAYMENTS);

    const reached = new Map<string, string>(); // payment id → event id
    let seenUpTo = 0;
    const seen = () => {
      for (const g of hook.received.slice(seenUpTo)) {
        const event = JSON.parse(g.body) as { id: string; data: { id: string } };
        reached.set(event.data.id, event.id);
      }
      seenUpTo = hook.received.length;
    };
    const waitStarted = Date.now();
    while (Date.now() - waitStarted < 180_000) {
      seen();
      if (paid.every((id) => reached.has(id))) break;
      await sleep(250);
    }
    const deliveredMs = Date.now() - started;
    const missing = paid.filter((id) => !reached.has(id));
    expect(missing.length, `payments whose event never arrived (e.g. ${missing.slice(0, 3).join(", ")})`).to.equal(0);
    // Each arrival is the event of one payment, signed (a sample: verifying 10,000 costs a while).
    const webhook = new Webhook(secret);
    for (const g of hook.received.filter((_g, i) => i % 100 === 0)) webhook.verify(g.body, g.headers);
    const eventIds = new Set(reached.values());
    expect(eventIds.size, "one event per payment").to.equal(PAYMENTS);
    for (const g of hook.received) expect(g.headers["webhook-id"]).to.equal(JSON.parse(g.body).id);

    // As the service says it: every delivery of the endpoint delivered, none failed or pending.
    let listed: { status: string; event_id: string }[] = [];
    for (let i = 0; i < 40; i++) {
      listed = await env.api.listAll(`/v2/webhook-endpoints/${endpointId}/deliveries`, alice, 100);
      if (listed.every((d) => d.status === "delivered")) break;
      await sleep(250);
    }
    const byStatus = listed.reduce<Record<string, number>>(
      (counts, d) => ({ ...counts, [d.status]: (counts[d.status] ?? 0) + 1 }),
      {},
    );
    expect(byStatus).to.deep.equal({ delivered: PAYMENTS });
    expect(new Set(listed.map((d) => d.event_id))).to.deep.equal(eventIds);
    console.log(
      `      webhooks burst: ${PAYMENTS} payments made in ${(paidMs / 1000).toFixed(1)} s ` +
        `(${Math.round(PAYMENTS / (paidMs / 1000))}/s, client concurrency ${CLIENT_CONCURRENCY}); every event delivered ` +
        `${(deliveredMs / 1000).toFixed(1)} s after the first payment; ${hook.received.length} requests received ` +
        `(${hook.received.length - PAYMENTS} repeats)`,
    );
  });
});
