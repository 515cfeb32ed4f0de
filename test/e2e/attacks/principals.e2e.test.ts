// An attacker with an ordinary member account (bob), against the real mesh: each attack as issue 33
// describes it, each one that worked on the code before keys had principals. Every principal acts
// only as itself — keys belong to who sent them, the keys orders derives cannot be predicted or
// reached, a looked-up outcome is checked before it is believed, and identity takes the client's
// address from the gateway alone.
import { expect } from "chai";
import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { ConnectError } from "@connectrpc/connect";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import { createServiceClient, openChannel } from "@switchyard/platform/grpc";
import {
  ALICE,
  BOB,
  CAROL,
  DEMO_PASSWORD,
  newKey,
  startE2eMesh,
  unique,
  type ApiResponse,
  type E2eMesh,
} from "../../support/http.js";

/**
 * The key orders sent with an order's charge or refund before it had a secret of its own: SHA-256
 * of public values (tenant, order id, step, attempt) shaped as a UUID — what an attacker computes.
 */
function publicStepKey(tenantId: string, orderId: number, kind: "charge" | "refund", attempt: number): string {
  const h = createHash("sha256")
    .update([tenantId, "order-step", orderId, kind, attempt].map(String).join("\u0000"))
    .digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${((parseInt(h[16]!, 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

describe("e2e attacks: every principal acts only as itself", function () {
  this.timeout(120_000);
  let env: E2eMesh;
  let alice: string;
  let bob: string;

  before(async function () {
    this.timeout(120_000);
    env = await startE2eMesh("attacks-principals", {
      // The reconciler settles what a tiny deadline left half-done within a second; logins counted
      // as deployed (5 failures), and the gateway behind one trusted proxy so tests can be addresses.
      env: { ORDERS_RECONCILE_INTERVAL_MS: "500", LOGIN_FAILURES_ALLOWED: "5" },
      envFor: { gateway: { GATEWAY_TRUSTED_PROXY_HOPS: "1" } },
    });
    alice = await env.api.login(ALICE);
    bob = await env.api.login(BOB);
  });
  after(async () => env?.stop());

  /** A new order of 50 books: 75,000 cents. */
  async function bigOrder(token: string): Promise<{ id: number; total: number }> {
    const res = await env.api.post("/v1/orders", {
      token,
      json: { currency: "EUR", items: [{ sku: "BOOK-1", quantity: 50 }] },
    });
    expect(res.status, res.text).to.equal(201);
    expect(res.json.total).to.equal(75_000);
    return { id: res.json.id as number, total: res.json.total as number };
  }

  /** 1-cent payments of the attacker's own, made beforehand under the keys orders will use for this order. */
  async function plantPayments(
    token: string,
    orderId: number,
    attempts: number,
    kind: "charge" | "refund" = "charge",
  ): Promise<string[]> {
    const planted: string[] = [];
    for (let attempt = 1; attempt <= attempts; attempt++) {
      const res = await env.api.post("/v1/payments", {
        token,
        key: publicStepKey("acme", orderId, kind, attempt),
        json: { amount: 1, currency: "EUR", source: "tok_attacker" },
      });
      expect(res.status, res.text).to.be.oneOf([200, 201]);
      planted.push(res.json.id as string);
    }
    return planted;
  }

  /** Pays until the order is paid (waiting out a step in progress), the last answer returned. */
  async function payUntilPaid(token: string, orderId: number): Promise<ApiResponse> {
    for (const until = Date.now() + 30_000; ;) {
      const res = await env.api.post(`/v1/orders/${orderId}/payment`, { token, json: { source: "tok_visa" } });
      if (res.status === 201) return res;
      const order = await env.api.get(`/v1/orders/${orderId}`, { token });
      if (order.json.status === "paid") return order;
      if (Date.now() > until) return res;
      await sleep(200);
    }
  }

  /** The order's payment, read as an admin: it must be the order's own charge of its total. */
  async function expectOwnCharge(orderId: number, total: number, planted: readonly string[]): Promise<void> {
    const order = await env.api.get(`/v1/orders/${orderId}`, { token: alice });
    expect(order.json.status, order.text).to.equal("paid");
    expect(planted, "the order is paid by a payment of the attacker's").to.not.include(order.json.payment_id);
    const payment = await env.api.get(`/v1/payments/${order.json.payment_id}`, { token: alice });
    expect([payment.json.amount, payment.json.currency, payment.json.reference], payment.text).to.deep.equal([
      total,
      "EUR",
      `order:${orderId}`,
    ]);
  }

  it("a member's 1-cent payments under the keys orders derives never pay a 75,000 order, however short the deadline", async () => {
    const order = await bigOrder(bob);
    const planted = await plantPayments(bob, order.id, 60);
    // Pay with deadlines of 1–40 ms: a call to payments cut off by its deadline is settled by
    // looking its key up — where the attacker's payment waited, before keys had principals.
    for (let i = 0; i < 60; i++) {
      const res = await env.api.post(`/v1/orders/${order.id}/payment`, {
        token: bob,
        json: { source: "tok_visa" },
        headers: { "x-request-timeout-ms": String(1 + (i % 40)) },
      });
      expect(res.status, res.text).to.be.oneOf([201, 409, 502, 504]);
      const now = await env.api.get(`/v1/orders/${order.id}`, { token: bob });
      if (now.json.status === "paid") break;
    }
    const paid = await payUntilPaid(bob, order.id);
    expect(paid.status, paid.text).to.be.oneOf([200, 201]);
    await expectOwnCharge(order.id, order.total, planted);
    // Cancelling refunds the order's own charge, never a payment of the attacker's.
    const cancelled = await env.api.post(`/v1/orders/${order.id}/cancel`, { token: bob });
    expect([cancelled.status, cancelled.json.status], cancelled.text).to.deep.equal([200, "cancelled"]);
    for (const id of planted) {
      const p = await env.api.get(`/v1/payments/${id}`, { token: bob });
      expect([p.json.amount, p.json.amount_refunded], `planted ${id}`).to.deep.equal([1, 0]);
    }
  });

  it("a member's payments under the keys of another's order do not block its pay, and no error names a key its owner never sent", async () => {
    const order = await bigOrder(alice);
    const planted = await plantPayments(bob, order.id, 3);
    const res = await env.api.post(`/v1/orders/${order.id}/payment`, { token: alice, json: { source: "tok_visa" } });
    expect(res.status, res.text).to.equal(201);
    expect(res.text).to.not.match(/idempotency/i);
    await expectOwnCharge(order.id, order.total, planted);
  });

  it("a member cannot claim, replay, probe or block another member's Idempotency-Key", async () => {
    const email = `dora-${unique()}@acme.test`;
    const created = await env.api.post("/v1/tenants/acme/users", {
      token: alice,
      json: { email, full_name: "Dora", password: "dora-password-123", role: "member" },
    });
    expect(created.status, created.text).to.equal(201);
    const dora = await env.api.login({ tenant: "acme", email }, "dora-password-123");
    const [key, otherKey] = [newKey(), newKey()];
    const bobsBody = { amount: 4_200, currency: "EUR", source: "tok_bob" };
    const bobs = await env.api.post("/v1/payments", { token: bob, key, json: bobsBody });
    expect(bobs.status, bobs.text).to.equal(201);
    expect((await env.api.post("/v1/payments", { token: bob, key: otherKey, json: bobsBody })).status).to.equal(201);
    // Bob's very body under his key: not bob's payment replayed to dora, but a first payment of her own.
    const replay = await env.api.post("/v1/payments", { token: dora, key, json: bobsBody });
    expect(replay.status, replay.text).to.equal(201);
    expect(replay.json.id).to.not.equal(bobs.json.id);
    // Another body under his other key: no 422 that tells the key is taken — again a payment of her own.
    const probe = await env.api.post("/v1/payments", {
      token: dora,
      key: otherKey,
      json: { amount: 1, currency: "EUR", source: "tok_dora" },
    });
    expect([probe.status, probe.json.amount], probe.text).to.deep.equal([201, 1]);
    // And bob's key still replays his own payment, untouched by dora's use of the value.
    const again = await env.api.post("/v1/payments", { token: bob, key, json: bobsBody });
    expect([again.status, again.json.id]).to.deep.equal([200, bobs.json.id]);
    // Orders alike: a key of bob's names no order of his to dora.
    const orderKey = newKey();
    const bobsOrder = await env.api.post("/v1/orders", {
      token: bob,
      key: orderKey,
      json: { currency: "EUR", items: [{ sku: "MUG-1", quantity: 1 }] },
    });
    const dorasOrder = await env.api.post("/v1/orders", {
      token: dora,
      key: orderKey,
      json: { currency: "EUR", items: [{ sku: "MUG-1", quantity: 1 }] },
    });
    expect([bobsOrder.status, dorasOrder.status]).to.deep.equal([201, 201]);
    expect(dorasOrder.json.id).to.not.equal(bobsOrder.json.id);
  });

  describe("identity takes the client's address from the gateway alone", () => {
    /** identity's gRPC port, reached directly as anything on the internal network can. */
    const identity = () => createServiceClient(IdentityService, openChannel(`127.0.0.1:${env.mesh.ports.identity}`));
    const reasonOf = (err: unknown) =>
      err instanceof ConnectError ? (errorInfoOf(err)?.reason ?? String(err.code)) : String(err);

    it("a forged x-client-address rotated on every guess dodges nothing: the caller's own address counts", async () => {
      const client = identity();
      const reasons: string[] = [];
      for (let i = 0; i < 30; i++) {
        const forged = `203.0.113.${i + 1}`;
        reasons.push(
          await client
            .createSession(
              { tenantId: "globex", email: `guess-${unique()}@globex.test`, password: "wrong-password" },
              { headers: { "x-client-address": forged } },
            )
            .then(() => "accepted", reasonOf),
        );
      }
      expect(
        reasons.slice(0, 20).every((r) => r === "INVALID_CREDENTIALS"),
        reasons.join(","),
      ).to.equal(true);
      expect(reasons.slice(20), "past the address's allowance").to.include("LOGIN_THROTTLED");
      expect(reasons).to.not.include("accepted");
    });

    it("a forged x-client-address throttles nobody at that address: carol still signs in from it through the gateway", async () => {
      const client = identity();
      const victim = "198.51.100.77";
      for (let i = 0; i < 8; i++) {
        await client
          .createSession(
            { tenantId: "globex", email: CAROL.email, password: `wrong-${i}` },
            { headers: { "x-client-address": victim, "service-authorization": `Bearer ${bob}` } },
          )
          .catch(() => undefined);
      }
      const res = await env.api.post(`/v1/tenants/${CAROL.tenant}/sessions`, {
        json: { email: CAROL.email, password: DEMO_PASSWORD },
        headers: { "x-forwarded-for": victim },
      });
      expect(res.status, res.text).to.equal(201);
      // While the forger's own address is refused (it guessed across accounts above).
      const forger = await client
        .createSession(
          { tenantId: "globex", email: CAROL.email, password: DEMO_PASSWORD },
          { headers: { "x-client-address": victim } },
        )
        .then(() => "accepted", reasonOf);
      expect(forger).to.equal("LOGIN_THROTTLED");
    });
  });
});
