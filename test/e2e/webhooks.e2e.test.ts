// End to end through the real mesh: a tenant's admins manage its webhook endpoints under /v2 — the
// secret in the creation's answer (and its replay) and the rotation's only, never in a read, a list
// or a log —, a member is refused (403), another tenant sees none of them (404), and no destination
// inside the network is taken (the mesh allows loopback and plain http, as npm start does: others are
// refused all the same). The routes are v2's alone. And the whole way: a payment, a refund and an
// order's changes made through the API reach a receiver, signed, their data what the API answered.
import { expect } from "chai";
import { setTimeout as sleep } from "node:timers/promises";
import { Webhook } from "standardwebhooks";
import { startReceiver } from "../../services/webhooks/test/support/receiver.js";
import { ALICE, BOB, CAROL, expectError, newKey, startE2eMesh, type Api, type E2eMesh } from "../support/http.js";
import { documentedPayloadProblems } from "../support/webhook-payloads.js";

const RELAY_LEASE_MS = 2_000;

const ENDPOINT_KEYS = [
  "created_at",
  "disabled_reason",
  "enabled",
  "event_types",
  "id",
  "previous_secret_expires_at",
  "updated_at",
  "url",
];
const ENDPOINT_ID = /^we_[A-Za-z0-9_-]{20}$/;
const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;

describe("e2e: webhook endpoints through the gateway", function () {
  this.timeout(30_000);

  let env: E2eMesh;
  let api: Api;
  let alice: string;
  let bob: string;
  let carol: string;

  before(async function () {
    this.timeout(90_000);
    // A relaying payments replica killed (-9) leaves its outbox lease to run out before the restarted
    // one relays: 2 s here, not 10, so that the test of it waits seconds.
    env = await startE2eMesh("webhooks", { envFor: { payments: { OUTBOX_RELAY_LEASE_MS: String(RELAY_LEASE_MS) } } });
    api = env.api;
    [alice, bob, carol] = await Promise.all([api.login(ALICE), api.login(BOB), api.login(CAROL)]);
  });

  after(async function () {
    this.timeout(30_000);
    await env?.stop();
  });

  const register = (token: string, url = "http://127.0.0.1:9/hooks", key = newKey()) =>
    api.post("/v2/webhook-endpoints", { token, key, json: { url, event_types: ["payment.succeeded", "order.paid"] } });

  it("registers an endpoint: 201, Location, the secret shown in that answer and its replay only", async () => {
    const key = newKey();
    const made = await register(alice, "http://127.0.0.1:9/hooks", key);
    expect(made.status, made.text).to.equal(201);
    expect(Object.keys(made.json).sort()).to.deep.equal([...ENDPOINT_KEYS, "secret"].sort());
    expect(made.json.id).to.match(ENDPOINT_ID);
    expect(made.json.secret).to.match(SECRET);
    expect(made.json).to.include({ url: "http://127.0.0.1:9/hooks", enabled: true, disabled_reason: null });
    expect(made.json.event_types).to.deep.equal(["payment.succeeded", "order.paid"]);
    expect(made.headers.get("location")).to.equal(`/v2/webhook-endpoints/${made.json.id}`);

    const replay = await register(alice, "http://127.0.0.1:9/hooks", key);
    expect(replay.status).to.equal(200);
    expect(replay.headers.get("idempotent-replayed")).to.equal("true");
    expect(replay.json).to.deep.equal(made.json);
    expectError(await register(alice, "http://127.0.0.1:9/other", key), 422, "IDEMPOTENCY_KEY_REUSED");
    expectError(
      await api.post("/v2/webhook-endpoints", {
        token: alice,
        json: { url: "http://127.0.0.1:9/", event_types: ["order.paid"] },
      }),
      400,
      "INVALID_REQUEST",
    );

    const read = await api.get(`/v2/webhook-endpoints/${made.json.id}`, { token: alice });
    expect(read.status).to.equal(200);
    expect(Object.keys(read.json).sort()).to.deep.equal(ENDPOINT_KEYS);
    const listed = await api.listAll("/v2/webhook-endpoints", alice);
    expect(listed.map((e) => e.id)).to.include(made.json.id);
    for (const answer of [read.text, JSON.stringify(listed)]) expect(answer).not.to.contain(made.json.secret);
    // Nor in any process's log.
    expect(env.mesh.logs.join("")).not.to.contain(made.json.secret);
  });

  it("changes, rotates (both secrets sign for 24 h) and deletes an endpoint", async () => {
    const made = (await register(alice)).json;
    const changed = await api.request("PATCH", `/v2/webhook-endpoints/${made.id}`, {
      token: alice,
      json: { event_types: ["order.shipped"], enabled: false },
    });
    expect(changed.status, changed.text).to.equal(200);
    expect(changed.json).to.include({ enabled: false, url: made.url });
    expect(changed.json.event_types).to.deep.equal(["order.shipped"]);
    expectError(
      await api.request("PATCH", `/v2/webhook-endpoints/${made.id}`, { token: alice, json: { status: "x" } }),
      400,
      "INVALID_REQUEST",
    );

    const rotated = await api.post(`/v2/webhook-endpoints/${made.id}/secret-rotations`, { token: alice });
    expect(rotated.status, rotated.text).to.equal(200);
    expect(rotated.json.secret).to.match(SECRET).and.not.equal(made.secret);
    const expires = Date.parse(rotated.json.previous_secret_expires_at as string);
    expect(expires - Date.now()).to.be.within(23.9 * 3_600_000, 24 * 3_600_000);

    expect((await api.delete(`/v2/webhook-endpoints/${made.id}`, { token: alice })).status).to.equal(204);
    expectError(await api.get(`/v2/webhook-endpoints/${made.id}`, { token: alice }), 404, "NOT_FOUND");
  });

  it("lets only the tenant's admins manage endpoints: a member 403, another tenant 404, no token 401", async () => {
    const made = (await register(alice)).json;
    expectError(await register(bob), 403, "ROLE_REQUIRED");
    expectError(await api.get("/v2/webhook-endpoints", { token: bob }), 403, "ROLE_REQUIRED");
    expectError(await api.get(`/v2/webhook-endpoints/${made.id}`, { token: bob }), 403, "ROLE_REQUIRED");
    expectError(await api.get(`/v2/webhook-endpoints/${made.id}`, { token: carol }), 404, "NOT_FOUND");
    expectError(await api.delete(`/v2/webhook-endpoints/${made.id}`, { token: carol }), 404, "NOT_FOUND");
    expectError(
      await api.post(`/v2/webhook-endpoints/${made.id}/secret-rotations`, { token: carol }),
      404,
      "NOT_FOUND",
    );
    expect((await api.listAll("/v2/webhook-endpoints", carol)).map((e) => e.id)).not.to.include(made.id);
    expect((await api.get("/v2/webhook-endpoints")).status).to.equal(401);
    expect((await api.get(`/v2/webhook-endpoints/${made.id}`, { token: alice })).json.enabled).to.equal(true);
  });

  it("refuses destinations inside the network the mesh does not allow, and unknown event types", async () => {
    for (const url of [
      "http://169.254.169.254/latest/meta-data/",
      "http://10.0.0.1/hooks",
      "http://192.168.1.1/hooks",
      "http://[fd00:ec2::254]/",
      "ftp://127.0.0.1/hooks",
      "http://does-not-resolve.invalid/hooks",
    ])
      expectError(await register(alice, url), 422, "RULE_VIOLATION");
    expectError(
      await api.post("/v2/webhook-endpoints", {
        token: alice,
        key: newKey(),
        json: { url: "http://127.0.0.1:9/", event_types: ["payment.failed"] },
      }),
      422,
      "RULE_VIOLATION",
    );
  });

  it("delivers what happens through the API — payment, refund, order paid, shipped, cancelled — signed, each event once, to its tenant's endpoint only", async function () {
    this.timeout(60_000);
    const acme = await startReceiver();
    const globex = await startReceiver();
    const ALL = ["payment.succeeded", "refund.succeeded", "order.paid", "order.shipped", "order.cancelled"];
    try {
      const endpoint = await api.post("/v2/webhook-endpoints", {
        token: alice,
        key: newKey(),
        json: { url: acme.url, event_types: ALL },
      });
      expect(endpoint.status, endpoint.text).to.equal(201);
      const theirs = await api.post("/v2/webhook-endpoints", {
        token: carol,
        key: newKey(),
        json: { url: globex.url, event_types: ALL },
      });
      expect(theirs.status, theirs.text).to.equal(201);

      const payment = await api.post("/v2/payments", {
        token: alice,
        key: newKey(),
        json: { amount: 1234, currency: "EUR", source: "tok_visa" },
      });
      expect(payment.status, payment.text).to.equal(201);
      const refund = await api.post(`/v2/payments/${payment.json.id}/refunds`, {
        token: alice,
        key: newKey(),
        json: { amount: 234 },
      });
      expect(refund.status, refund.text).to.equal(201);
      const newOrder = async () =>
        (
          await api.post("/v2/orders", {
            token: alice,
            json: { currency: "EUR", items: [{ sku: "MUG-1", quantity: 1 }] },
          })
        ).json.id as number;
      const shipped = await newOrder();
      expect(
        (await api.post(`/v2/orders/${shipped}/payment`, { token: alice, json: { source: "tok_visa" } })).status,
      ).to.equal(201);
      expect((await api.post(`/v2/orders/${shipped}/shipments`, { token: alice, json: {} })).status).to.equal(201);
      const cancelled = await newOrder();
      expect((await api.post(`/v2/orders/${cancelled}/cancel`, { token: alice })).status).to.equal(200);

      // payment.succeeded ×2 (the order's charge too), refund.succeeded, order.paid, order.shipped, order.cancelled.
      for (let i = 0; i < 200 && acme.received.length < 6; i++) await sleep(50);
      await sleep(300);
      const events = acme.received.map(
        (g) => new Webhook(endpoint.json.secret as string).verify(g.body, g.headers) as any,
      );
      expect(events.map((e) => e.type).sort()).to.deep.equal([
        "order.cancelled",
        "order.paid",
        "order.shipped",
        "payment.succeeded",
        "payment.succeeded",
        "refund.succeeded",
      ]);
      expect(new Set(acme.received.map((g) => g.headers["webhook-id"])).size, "each event once").to.equal(6);
      const problems = documentedPayloadProblems();
      for (const e of events) {
        expect(problems(e), `${e.type}: as the v2 document's webhooks say`).to.deep.equal([]);
        expect(e.id).to.equal(acme.received[events.indexOf(e)]!.headers["webhook-id"]);
        expect(e.tenant_id).to.equal("acme");
        expect(Date.parse(e.timestamp as string)).to.be.greaterThan(0);
      }
      const find = (type: string, id: unknown) => events.find((e) => e.type === type && e.data.id === id);
      // The data is the resource as the change left it, in its v2 representation: what the API answered.
      expect(find("payment.succeeded", payment.json.id)?.data).to.deep.equal(payment.json);
      expect(find("refund.succeeded", refund.json.id)?.data).to.deep.equal(refund.json);
      const shippedNow = (await api.get(`/v2/orders/${shipped}`, { token: alice })).json;
      expect(find("order.shipped", shipped)?.data).to.deep.equal(shippedNow);
      expect(find("order.paid", shipped)?.data.status).to.equal("paid");
      expect(find("order.cancelled", cancelled)?.data.status).to.equal("cancelled");
      expect(globex.received, "another tenant's endpoint gets none of it").to.deep.equal([]);

      // The endpoint's deliveries, each with its attempt: to its tenant's admins only.
      const listed = await api.listAll(`/v2/webhook-endpoints/${endpoint.json.id}/deliveries`, alice);
      expect(listed.map((d) => d.status)).to.deep.equal(Array(6).fill("delivered"));
      expect(listed.map((d) => d.event_id).sort()).to.deep.equal(events.map((e) => e.id).sort());
      for (const d of listed) {
        expect(d.next_attempt_at).to.equal(null);
        expect(d.attempts).to.have.length(1);
        expect(d.attempts[0]).to.include({ status_code: 204, error: null, response_excerpt: "" });
      }
      expectError(
        await api.get(`/v2/webhook-endpoints/${endpoint.json.id}/deliveries`, { token: carol }),
        404,
        "NOT_FOUND",
      );
      expectError(
        await api.get(`/v2/webhook-endpoints/${endpoint.json.id}/deliveries`, { token: bob }),
        403,
        "ROLE_REQUIRED",
      );
    } finally {
      await acme.close();
      await globex.close();
    }
  });

  it("delivers a payment committed just before payments was killed (-9) while the webhooks service was away: after both are back, once", async function () {
    this.timeout(120_000);
    const hook = await startReceiver();
    try {
      const endpoint = await api.post("/v2/webhook-endpoints", {
        token: alice,
        key: newKey(),
        json: { url: hook.url, event_types: ["payment.succeeded"] },
      });
      expect(endpoint.status, endpoint.text).to.equal(201);
      // Nowhere to relay to: the event can only wait in payments' outbox.
      await env.mesh.stopService("webhooks");
      const payment = await api.post("/v2/payments", {
        token: alice,
        key: newKey(),
        json: { amount: 4321, currency: "EUR", source: "tok_killed" },
      });
      expect(payment.status, payment.text).to.equal(201);
      await env.mesh.stopService("payments", "SIGKILL");
      await env.mesh.restartService("payments");
      await env.mesh.restartService("webhooks");
      const mine = () =>
        hook.received.filter((g) => (JSON.parse(g.body) as { data: { id: string } }).data.id === payment.json.id);
      // After the killed replica's lease runs out, the restarted one takes it at its next look (a third of it).
      for (const until = Date.now() + 2 * RELAY_LEASE_MS + 8_000; mine().length === 0 && Date.now() < until;)
        await sleep(50);
      await sleep(500);
      expect(mine(), "delivered once").to.have.length(1);
      const event = new Webhook(endpoint.json.secret as string).verify(mine()[0]!.body, mine()[0]!.headers) as {
        type: string;
        data: unknown;
      };
      expect(event.type).to.equal("payment.succeeded");
      expect(event.data).to.deep.equal(payment.json);
    } finally {
      await hook.close();
    }
  });

  it("sends a test event on request: signed, listed among the deliveries; a disabled endpoint is refused", async () => {
    const hook = await startReceiver();
    try {
      const made = await api.post("/v2/webhook-endpoints", {
        token: alice,
        key: newKey(),
        json: { url: hook.url, event_types: ["order.shipped"] },
      });
      const id = made.json.id as string;
      const sent = await api.post(`/v2/webhook-endpoints/${id}/test-events`, { token: alice });
      expect(sent.status, sent.text).to.equal(202);
      expect(sent.json).to.include({ event_type: "webhook.test", status: "pending" });
      for (let i = 0; i < 100 && hook.received.length === 0; i++) await sleep(50);
      const event = new Webhook(made.json.secret as string).verify(hook.received[0]!.body, hook.received[0]!.headers);
      expect(event).to.include({ id: sent.json.event_id, type: "webhook.test", tenant_id: "acme" });
      expect((event as { data: unknown }).data).to.deep.equal({ endpoint_id: id });
      expect(documentedPayloadProblems()(event as { type: string }), "as documented").to.deep.equal([]);
      const [listed] = await api.listAll(`/v2/webhook-endpoints/${id}/deliveries`, alice);
      expect(listed).to.include({ id: sent.json.id, status: "delivered" });

      // Sent again on request: the same event (webhook-id), a second attempt in its list.
      const again = await api.post(`/v2/webhook-endpoints/${id}/deliveries/${sent.json.id}/redeliveries`, {
        token: alice,
      });
      expect(again.status, again.text).to.equal(202);
      expect(again.json).to.include({ id: sent.json.id, status: "pending" });
      for (let i = 0; i < 100 && hook.received.length < 2; i++) await sleep(50);
      expect(hook.received.map((g) => g.headers["webhook-id"])).to.deep.equal([sent.json.event_id, sent.json.event_id]);
      for (let i = 0; i < 100; i++) {
        const [now] = await api.listAll(`/v2/webhook-endpoints/${id}/deliveries`, alice);
        if (now.attempts.length === 2) break;
        await sleep(50);
      }
      const [twice] = await api.listAll(`/v2/webhook-endpoints/${id}/deliveries`, alice);
      expect([twice.status, twice.attempts.length]).to.deep.equal(["delivered", 2]);
      expectError(
        await api.post(`/v2/webhook-endpoints/${id}/deliveries/whd_nonsense/redeliveries`, { token: alice }),
        404,
        "NOT_FOUND",
      );
      expectError(
        await api.post(`/v2/webhook-endpoints/${id}/deliveries/${sent.json.id}/redeliveries`, { token: carol }),
        404,
        "NOT_FOUND",
      );
      expectError(await api.post(`/v2/webhook-endpoints/${id}/test-events`, { token: bob }), 403, "ROLE_REQUIRED");
      expectError(await api.post(`/v2/webhook-endpoints/${id}/test-events`, { token: carol }), 404, "NOT_FOUND");
      await api.request("PATCH", `/v2/webhook-endpoints/${id}`, { token: alice, json: { enabled: false } });
      expectError(await api.post(`/v2/webhook-endpoints/${id}/test-events`, { token: alice }), 409, "INVALID_STATE");
    } finally {
      await hook.close();
    }
  });

  it("a receiver that never answers and one that sends 10 MB back delay no other endpoint: each payment reaches it within seconds", async function () {
    this.timeout(60_000);
    // Never answers: each attempt holds its connection until the 10 s timeout.
    const stuck = await startReceiver(() => {});
    // Answers 200 with 10 MB: at most 64 KiB of it is read.
    const huge = await startReceiver((_req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.end(Buffer.alloc(10 * 1024 * 1024, "x"));
    });
    const good = await startReceiver();
    const ids: string[] = [];
    try {
      for (const receiver of [stuck, huge, good]) {
        const made = await api.post("/v2/webhook-endpoints", {
          token: alice,
          key: newKey(),
          json: { url: receiver.url, event_types: ["payment.succeeded"] },
        });
        expect(made.status, made.text).to.equal(201);
        ids.push(made.json.id as string);
      }
      const paid: string[] = [];
      for (let i = 0; i < 8; i++) {
        const payment = await api.post("/v2/payments", {
          token: alice,
          key: newKey(),
          json: { amount: 100 + i, currency: "EUR", source: "tok_visa" },
        });
        expect(payment.status, payment.text).to.equal(201);
        paid.push(payment.json.id as string);
      }
      const started = Date.now();
      const reached = () => new Set(good.received.map((g) => (JSON.parse(g.body) as { data: { id: string } }).data.id));
      while (Date.now() - started < 8_000 && !paid.every((id) => reached().has(id))) await sleep(50);
      expect(
        [...reached()].filter((id) => paid.includes(id)).sort(),
        "every payment at the good endpoint",
      ).to.deep.equal([...paid].sort());
      expect(Date.now() - started, "long before the stuck endpoint's attempts time out").to.be.below(8_000);
      expect(stuck.received.length, "the stuck endpoint holds at most 4 attempts at a time").to.be.at.most(4);
      // The huge answer does not hold its endpoint either: its deliveries are done.
      // (Counted by payment: an event an earlier test left to relay late goes to every endpoint there is then.)
      const hugeGot = () =>
        huge.received.filter((g) => paid.includes((JSON.parse(g.body) as { data: { id: string } }).data.id)).length;
      for (let i = 0; i < 100 && hugeGot() < 8; i++) await sleep(50);
      expect(hugeGot()).to.equal(8);
    } finally {
      for (const id of ids) await api.delete(`/v2/webhook-endpoints/${id}`, { token: alice });
      await Promise.all([stuck.close(), huge.close(), good.close()]);
    }
  });

  it("is v2's alone: there is no /v1/webhook-endpoints", async () => {
    expect((await api.get("/v1/webhook-endpoints", { token: alice })).status).to.equal(404);
  });
});
