// The orders → payments chain through the real processes: payments down → 502 and the order
// unchanged; payments too slow → 504 at the deadline; and the walk a user takes (pay, ship, refused
// cancel, refunded cancel).
import { expect } from "chai";
import { setTimeout as sleep } from "node:timers/promises";
import { ALICE, Api, expectError, startE2eMesh, type E2eMesh } from "../support/http.js";

describe("e2e: orders and the chain to payments", function () {
  this.timeout(120_000);
  let env: E2eMesh;
  let api: Api;
  let token: string;

  const newOrder = async (unitPrice: number) => {
    const res = await api.post("/v1/orders", { token, json: { currency: "EUR", items: [{ sku: "BOOK-1", quantity: 2, unit_price: unitPrice }] } });
    expect(res.status, res.text).to.equal(201);
    expect(res.headers.get("location")).to.equal(`/v1/orders/${res.json.id}`);
    return res.json as { id: number; total: number };
  };
  const statusOf = async (id: number) => (await api.get(`/v1/orders/${id}`, { token })).json.status as string;

  before(async () => {
    env = await startE2eMesh("orders-chain", { envFor: { gateway: { GATEWAY_DEADLINE_MS: "1500" } } });
    api = new Api(env.mesh.gatewayUrl);
    token = await api.login(ALICE);
  });
  afterEach(() => {
    env.mesh.process("payments").kill("SIGCONT");
  });
  after(async () => env?.stop());

  it("pays (201, Location of the payment), ships, refuses a cancel naming the state, and refunds a cancelled paid order", async () => {
    const order = await newOrder(1500);
    const discount = await api.post(`/v1/orders/${order.id}/discounts`, { token, json: { code: "WELCOME", amount: 500 } });
    expect(discount.status, discount.text).to.equal(201);
    const paid = await api.post(`/v1/orders/${order.id}/payment`, { token, json: { source: "tok_visa" } });
    expect(paid.status, paid.text).to.equal(201);
    const paymentPath = paid.headers.get("location")!;
    expect(paymentPath).to.match(/^\/v1\/payments\/pay_/);
    expect((await api.get(paymentPath, { token })).json.amount).to.equal(2500);
    expect((await api.post(`/v1/orders/${order.id}/shipments`, { token })).status).to.equal(201);
    const refused = await api.post(`/v1/orders/${order.id}/cancel`, { token });
    expectError(refused, 409, "INVALID_STATE");
    expect(refused.json.error).to.include("shipped");

    const second = await newOrder(999);
    const secondPaid = await api.post(`/v1/orders/${second.id}/payment`, { token, json: { source: "tok_visa" } });
    const cancelled = await api.post(`/v1/orders/${second.id}/cancel`, { token });
    expect(cancelled.status, cancelled.text).to.equal(200);
    expect(cancelled.json.status).to.equal("cancelled");
    const refunds = await api.get(`${secondPaid.headers.get("location")}/refunds`, { token });
    expect(refunds.json.items.map((r: { id: string; amount: number }) => [r.id, r.amount])).to.deep.equal([[cancelled.json.refund_id, 1998]]);
  });

  it("answers 502 at once when payments is down, and leaves the order pending", async () => {
    const order = await newOrder(700);
    await env.mesh.stopService("payments");
    try {
      const res = await api.post(`/v1/orders/${order.id}/payment`, { token, json: { source: "tok_visa" } });
      expectError(res, 502, "UPSTREAM_UNAVAILABLE");
      expect(res.ms).to.be.lessThan(1_000);
      expect(await statusOf(order.id)).to.equal("pending");
    } finally {
      await env.mesh.restartService("payments");
    }
    expect((await api.post(`/v1/orders/${order.id}/payment`, { token, json: { source: "tok_visa" } })).status).to.equal(201);
  });

  it("answers 504 at the deadline when payments is too slow, and a retry never charges twice", async () => {
    const order = await newOrder(4321);
    env.mesh.process("payments").kill("SIGSTOP");
    const res = await api.post(`/v1/orders/${order.id}/payment`, { token, json: { source: "tok_visa" } });
    expectError(res, 504, "DEADLINE_EXCEEDED");
    expect(res.ms).to.be.within(1_200, 4_000);
    env.mesh.process("payments").kill("SIGCONT");
    // As a client should after a 504 on an unsafe call: read the state, then retry (the key is derived from the order).
    let status = await statusOf(order.id);
    for (let i = 0; i < 10 && status === "pending"; i++) {
      await sleep(1_000);
      const retry = await api.post(`/v1/orders/${order.id}/payment`, { token, json: { source: "tok_visa" } });
      if (retry.status === 201 || retry.status === 409) break;
      status = await statusOf(order.id);
    }
    expect(await statusOf(order.id)).to.equal("paid");
    const payments = await api.listAll("/v1/payments", token);
    expect(payments.filter((p: { amount: number }) => p.amount === 8642), "one charge for the order").to.have.length(1);
  });
});
