// Deliveries on every store adapter, to real HTTP receivers: an event is recorded once and delivered
// to each endpoint that asked for its type, signed (verified with the standardwebhooks package); a
// failing endpoint is tried again later with the same webhook-id; a lease that ran out (its holder
// died mid-attempt) is claimed again while a live one never is; replicas claiming at once keep one
// holder per delivery and the bound per endpoint; a slow endpoint holds up only itself; and a delivery failing for 3 days fails for good and disables an endpoint that delivered nothing.
import { expect } from "chai";
import { randomBytes, randomUUID } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { createLogger } from "@switchyard/platform/logger.js";
import { webhookDeliveries } from "@switchyard/platform/metrics.js";
import type { SqlDatabase } from "@switchyard/platform/store";
import { forEachDatabase } from "../../platform/test/support/databases.js";
import { parseNetworks } from "../src/domain/destinations.js";
import type { EventType } from "../src/domain/endpoints.js";
import { newEndpointSecret, SecretBox } from "../src/endpoint-secrets.js";
import { SqlDeliveriesStore } from "../src/store/delivery-sql-store.js";
import { webhooksMigrations } from "../src/store/migrations.js";
import { SqlWebhooksStore } from "../src/store/sql-store.js";
import { attemptDelivery } from "../src/workflow/attempt.js";
import { retryStep, type RetrySchedule } from "../src/domain/retries.js";
import { DeliveryWorker } from "../src/workflow/delivery-worker.js";
import { startReceiver } from "./support/receiver.js";

const LOOPBACK = { allowPlainHttp: true, allowedNetworks: parseNetworks("127.0.0.0/8") };
const logger = createLogger("test", "silent");

/** A receiver answering `status()`, or never (undefined). */
const receiver = (status: () => number | undefined) =>
  startReceiver((_req, res) => {
    const answer = status();
    if (answer !== undefined) res.writeHead(answer).end();
  });

forEachDatabase("webhook deliveries", (dbs) => {
  let db: SqlDatabase;
  let endpoints: SqlWebhooksStore;
  let deliveries: SqlDeliveriesStore;
  before(async () => {
    db = await dbs.open(webhooksMigrations);
    endpoints = new SqlWebhooksStore(db, new SecretBox(randomBytes(32)));
    deliveries = new SqlDeliveriesStore(db);
  });

  const newTenant = () => `t-${randomBytes(4).toString("hex")}`;
  const endpoint = async (tenant: string, url: string, eventTypes: EventType[] = ["payment.succeeded"]) => {
    const secret = newEndpointSecret();
    const { result } = await endpoints.createEndpoint(
      tenant,
      { principal: "user:1", key: randomUUID(), requestHash: "h" },
      { url, eventTypes, secret },
    );
    return { id: result.endpoint.id, secret };
  };
  const event = (tenant: string, type = "payment.succeeded") => {
    const id = `evt_${randomBytes(15).toString("base64url")}`;
    return { id, tenantId: tenant, type, occurredAt: new Date(), body: JSON.stringify({ id, type, data: { n: 1 } }) };
  };
  const worker = (holder: string, options: { perEndpoint?: number; timeoutMs?: number } = {}) =>
    new DeliveryWorker(
      {
        store: deliveries,
        secrets: (tenantId, endpointId) => endpoints.signingSecrets(tenantId, endpointId),
        attempt: (d) =>
          attemptDelivery(d, {
            destinations: LOOPBACK,
            resolve: async () => [],
            limits: { timeoutMs: options.timeoutMs ?? 2_000, maxAnswerBytes: 65_536, excerptBytes: 1024 },
          }),
        logger,
        random: () => 0.5,
      },
      { holder, pollMs: 50, concurrency: 10, perEndpoint: options.perEndpoint ?? 4, leaseMs: 30_000 },
    );
  const deliveryOf = async (eventId: string) =>
    (
      await db.query<{ id: string; status: string; attempts: number; next_attempt_at: Date; endpoint_id: string }>(
        `SELECT id, status, attempts, next_attempt_at, endpoint_id FROM deliveries WHERE event_id = $1 ORDER BY endpoint_id`,
        [eventId],
      )
    ).rows;

  it("records an event once, with a delivery to each enabled endpoint of its tenant asking for its type, and delivers it signed", async () => {
    const tenant = newTenant();
    const hook = await receiver(() => 204);
    try {
      const wanted = await endpoint(tenant, hook.url);
      await endpoint(tenant, hook.url, ["order.paid"]);
      await endpoint(newTenant(), hook.url);
      const e = event(tenant);
      expect(await deliveries.recordEvents([e])).to.deep.equal({ recorded: 1, deliveries: 1 });
      expect(await deliveries.recordEvents([e]), "sent again by a relay").to.deep.equal({ recorded: 0, deliveries: 0 });
      expect((await deliveryOf(e.id)).map((d) => d.endpoint_id)).to.deep.equal([wanted.id]);

      const deliveredCount = async () =>
        (await webhookDeliveries.get()).values.find((v) => v.labels.outcome === "delivered")?.value ?? 0;
      const before = await deliveredCount();
      expect(await worker("a").runOnce()).to.equal(1);
      expect(await deliveredCount(), "counted").to.equal(before + 1);
      expect(hook.received).to.have.length(1);
      expect(new Webhook(wanted.secret).verify(hook.received[0]!.body, hook.received[0]!.headers)).to.deep.equal(
        JSON.parse(e.body),
      );
      expect(hook.received[0]!.headers["webhook-id"]).to.equal(e.id);
      expect((await deliveryOf(e.id))[0]).to.include({ status: "delivered", attempts: 1 });
      expect(await worker("a").runOnce(), "nothing more to do").to.equal(0);
    } finally {
      await hook.close();
    }
  });

  it("records a relay's batch in one go: each new event once, a delivery for each endpoint asking, none for the rest", async () => {
    const tenant = newTenant();
    const wanted = await endpoint(tenant, "http://127.0.0.1:9/hook");
    const [a, b, seen] = [event(tenant), event(tenant), event(tenant)];
    const unwanted = event(tenant, "order.shipped");
    await deliveries.recordEvents([seen]);
    expect(await deliveries.recordEvents([a, seen, b, unwanted, a]), "seen before, and a twice").to.deep.equal({
      recorded: 3,
      deliveries: 2,
    });
    for (const e of [a, b]) expect((await deliveryOf(e.id)).map((d) => d.endpoint_id)).to.deep.equal([wanted.id]);
    expect(await deliveryOf(unwanted.id), "no endpoint asked for its type").to.deep.equal([]);
    expect(await deliveries.recordEvents([event(newTenant())]), "a tenant without endpoints").to.deep.equal({
      recorded: 1,
      deliveries: 0,
    });
  });

  it("tries a failing endpoint again later, with the same webhook-id, and records every attempt", async () => {
    const tenant = newTenant();
    let answer = 500;
    const hook = await receiver(() => answer);
    try {
      await endpoint(tenant, hook.url);
      const e = event(tenant);
      await deliveries.recordEvents([e]);
      await worker("a").runOnce();
      const [failed] = await deliveryOf(e.id);
      expect(failed).to.include({ status: "pending", attempts: 1 });
      // 30 s after, at half jitter between 15 and 30: 22.5 s.
      expect(failed!.next_attempt_at.getTime() - Date.now()).to.be.within(20_000, 23_000);
      expect(await worker("a").runOnce(), "not due yet").to.equal(0);
      await db.query(`UPDATE deliveries SET next_attempt_at = clock_timestamp() WHERE id = $1`, [failed!.id]);
      answer = 200;
      await worker("b").runOnce();
      expect((await deliveryOf(e.id))[0]).to.include({ status: "delivered", attempts: 2 });
      expect(hook.received.map((g) => g.headers["webhook-id"])).to.deep.equal([e.id, e.id]);
      const { rows } = await db.query<{ status: number }>(
        `SELECT status FROM delivery_attempts WHERE delivery_id = $1 ORDER BY id`,
        [failed!.id],
      );
      expect(rows.map((r) => r.status)).to.deep.equal([500, 200]);
      // As the endpoint's delivery list shows it.
      const [listed] = await deliveries.listDeliveries(failed!.endpoint_id, undefined, 10);
      expect([listed!.id, listed!.eventId, listed!.eventType, listed!.status]).to.deep.equal([
        failed!.id,
        e.id,
        "payment.succeeded",
        "delivered",
      ]);
      expect(listed!.attempts.map((a) => [a.status, a.error])).to.deep.equal([
        [500, undefined],
        [200, undefined],
      ]);
    } finally {
      await hook.close();
    }
  });

  it("claims a delivery for one holder at a time; one whose holder died is claimed again once its lease ran out", async () => {
    const tenant = newTenant();
    const hook = await receiver(() => 200);
    try {
      await endpoint(tenant, hook.url);
      const e = event(tenant);
      await deliveries.recordEvents([e]);
      const options = { limit: 10, perEndpoint: 4, leaseMs: 300 };
      const [claimed] = await deliveries.claimDue("dead", options);
      expect(claimed?.eventId).to.equal(e.id);
      expect(await deliveries.claimDue("other", options), "leased").to.deep.equal([]);
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(await worker("other").runOnce(), "its lease ran out").to.equal(1);
      // The dead holder's late word changes nothing (its attempt is still kept).
      await deliveries.finishAttempt(
        claimed!,
        "dead",
        { attemptedAt: new Date(), status: 500, latencyMs: 1, excerpt: "", error: undefined },
        { kind: "retry", at: new Date() },
      );
      expect((await deliveryOf(e.id))[0]).to.include({ status: "delivered", attempts: 1 });
    } finally {
      await hook.close();
    }
  });

  it("keeps a slow endpoint to its bound of deliveries in flight: the others' go on", async () => {
    const tenant = newTenant();
    const slow = await receiver(() => undefined);
    const fast = await receiver(() => 200);
    try {
      await endpoint(tenant, slow.url, ["order.paid"]);
      await endpoint(tenant, fast.url, ["order.shipped"]);
      for (let i = 0; i < 5; i++) await deliveries.recordEvents([event(tenant, "order.paid")]);
      for (let i = 0; i < 3; i++) await deliveries.recordEvents([event(tenant, "order.shipped")]);
      const bound = { limit: 20, perEndpoint: 2, leaseMs: 30_000 };
      const claimed = await deliveries.claimDue("a", bound);
      const byUrl = (list: typeof claimed, url: string) => list.filter((c) => c.url === url);
      expect([byUrl(claimed, slow.url).length, byUrl(claimed, fast.url).length]).to.deep.equal([2, 2]);
      // The fast endpoint answers; the slow one never does: only the fast one gets more.
      for (const done of byUrl(claimed, fast.url))
        await deliveries.finishAttempt(
          done,
          "a",
          { attemptedAt: new Date(), status: 200, latencyMs: 3, excerpt: "", error: undefined },
          { kind: "delivered" },
        );
      const next = await deliveries.claimDue("b", bound);
      expect([byUrl(next, slow.url).length, byUrl(next, fast.url).length]).to.deep.equal([0, 1]);
    } finally {
      await slow.close();
      await fast.close();
    }
  });

  it("keeps one holder per delivery and the bound per endpoint while replicas claim at once", async () => {
    // Replicas: opens of one place (separate pools on the server; PGlite has one connection).
    const place = dbs.place();
    const opens = [await place.open(webhooksMigrations)];
    if (dbs.target.sharedOpens) opens.push(await place.open(webhooksMigrations));
    const replicas = [0, 1, 2, 3].map((i) => new SqlDeliveriesStore(opens[i % opens.length]!));
    const placeEndpoints = new SqlWebhooksStore(opens[0]!, new SecretBox(randomBytes(32)));
    const tenant = newTenant();
    for (let i = 0; i < 3; i++)
      await placeEndpoints.createEndpoint(
        tenant,
        { principal: "user:1", key: randomUUID(), requestHash: "h" },
        { url: `https://hook-${i}.example.com/`, eventTypes: ["payment.succeeded"], secret: newEndpointSecret() },
      );
    for (let i = 0; i < 20; i++) await replicas[0]!.recordEvents([event(tenant)]);
    const bound = { limit: 3, perEndpoint: 2, leaseMs: 30_000 };
    const done = new Set<string>();
    for (let round = 0; round < 10; round++) {
      const claims = await Promise.all(replicas.map((r, i) => r.claimDue(`replica-${i}`, bound)));
      const ids = claims.flat().map((d) => d.id);
      expect(new Set(ids).size, `round ${round}: held twice`).to.equal(ids.length);
      expect(
        ids.filter((id) => done.has(id)),
        `round ${round}: delivered already`,
      ).to.deep.equal([]);
      const { rows } = await opens[0]!.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM deliveries WHERE lease_expires_at > clock_timestamp() GROUP BY endpoint_id`,
      );
      expect(
        rows.map((r) => r.n),
        `round ${round}: in flight per endpoint`,
      ).to.deep.equal([2, 2, 2]);
      await Promise.all(
        claims.flatMap((claimed, i) =>
          claimed.map((d) =>
            replicas[i]!.finishAttempt(
              d,
              `replica-${i}`,
              { attemptedAt: new Date(), status: 204, latencyMs: 1, excerpt: "", error: undefined },
              { kind: "delivered" },
            ),
          ),
        ),
      );
      ids.forEach((id) => done.add(id));
    }
    expect(done.size, "every delivery, once").to.equal(60);
  });

  it("fails a delivery for good after 3 days, and disables an endpoint that delivered nothing in them, saying why", async () => {
    const tenant = newTenant();
    const hook = await receiver(() => 503);
    try {
      const { id } = await endpoint(tenant, hook.url);
      const e = event(tenant);
      await deliveries.recordEvents([e]);
      await db.query(`UPDATE endpoints SET created_at = clock_timestamp() - interval '4 days' WHERE id = $1`, [id]);
      await db.query(
        `UPDATE deliveries SET attempts = 20, first_attempt_at = clock_timestamp() - interval '3 days' WHERE event_id = $1`,
        [e.id],
      );
      await worker("a").runOnce();
      expect((await deliveryOf(e.id))[0]).to.include({ status: "failed", attempts: 21 });
      const disabled = (await endpoints.getEndpoint(tenant, id))!;
      expect(disabled.enabled).to.equal(false);
      expect(disabled.disabledReason).to.match(/every delivery failed for 72 hours/);
      const later = event(tenant);
      await deliveries.recordEvents([later]);
      expect(await deliveryOf(later.id), "a disabled endpoint gets nothing new").to.deep.equal([]);
      const enabled = (await endpoints.updateEndpoint(tenant, id, { enabled: true }))!;
      expect([enabled.enabled, enabled.disabledReason]).to.deep.equal([true, ""]);
    } finally {
      await hook.close();
    }
  });
  /** How late an attempt may be made on a loaded machine (a full test run beside it). */
  const SLACK_MS = 2_500;

  it("on a compressed schedule, in real time: retries back off within their jitter, then the delivery fails and the endpoint is disabled, saying why", async () => {
    const tenant = newTenant();
    const hook = await startReceiver((_req, res) => void res.writeHead(500).end());
    // 3 days compressed 100,000 times: 30 s → 0.3 ms would be below the poll; 40 ms doubling to 320 ms, for 2.5 s.
    const schedule: RetrySchedule = { firstRetryMs: 40, longestWaitMs: 320, giveUpAfterMs: 2_500 };
    const running = new DeliveryWorker(
      {
        store: deliveries,
        secrets: (tenantId, endpointId) => endpoints.signingSecrets(tenantId, endpointId),
        attempt: (d) => attemptDelivery(d, { destinations: LOOPBACK, resolve: async () => [] }),
        logger,
        retries: schedule,
      },
      { holder: "compressed", pollMs: 10, concurrency: 4, perEndpoint: 4, leaseMs: 30_000 },
    );
    try {
      const { id } = await endpoint(tenant, hook.url);
      await db.query(`UPDATE endpoints SET created_at = clock_timestamp() - interval '1 hour' WHERE id = $1`, [id]);
      const e = event(tenant);
      await deliveries.recordEvents([e]);
      running.start();
      for (let i = 0; i < 200 && (await deliveryOf(e.id))[0]?.status !== "failed"; i++)
        await new Promise((resolve) => setTimeout(resolve, 50));
      // As the service recorded them: each attempt's time, taken as it began.
      const [listed] = await deliveries.listDeliveries(id, undefined, 1);
      const at = listed!.attempts.map((a) => a.attemptedAt.getTime());
      expect(listed!.status).to.equal("failed");
      expect(at.length, "every attempt reached the receiver").to.equal(hook.received.length);
      // Each wait at least half its step; at most all of it and then recording the attempt, the poll and a
      // claim (SLACK: seconds on a machine busy with a whole test run; an embedded database's first
      // queries are slow).
      for (let n = 1; n < at.length; n++)
        expect(at[n]! - at[n - 1]!, `wait ${n}`).to.be.within(
          retryStep(n, schedule) / 2 - 1,
          retryStep(n, schedule) + SLACK_MS,
        );
      // 40, 80, 160, then 320 ms steps: at least 1 + 2,500 / (320 + SLACK) attempts, at most 4 + 2,500 / 160.
      expect(at.length).to.be.within(2, 20);
      // Each due within the give-up period (an attempt is due no later), made at most the same slack after.
      expect(at[at.length - 1]! - at[0]!, "within the give-up period").to.be.at.most(schedule.giveUpAfterMs + SLACK_MS);
      const disabled = (await endpoints.getEndpoint(tenant, id))!;
      expect([disabled.enabled, disabled.disabledReason]).to.deep.equal([
        false,
        "every delivery failed for 3 s; enable it again once it answers",
      ]);
    } finally {
      await running.stop();
      await hook.close();
    }
  });
});
