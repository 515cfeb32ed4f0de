// End to end through the real mesh: payments and refunds — Location, idempotent replays (also
// under concurrency), tenant-scoped keys and data, who may see and refund what (a member their own
// payments, refunds admin-only), refund arithmetic under concurrency, and keyset paging that neither
// repeats nor skips while rows are inserted.
import { expect } from "chai";
import { randomBytes } from "node:crypto";
import {
  ALICE,
  BOB,
  CAROL,
  expectError,
  newKey,
  startE2eMesh,
  unique,
  type Api,
  type ApiResponse,
  type E2eMesh,
} from "../support/http.js";

const PAYMENT_KEYS = [
  "amount",
  "amount_refunded",
  "created_at",
  "currency",
  "id",
  "reference",
  "source",
  "status",
  "user_id",
];
const REFUND_KEYS = ["amount", "created_at", "currency", "id", "payment_id", "reason"];
const PAYMENT_ID = /^pay_[A-Za-z0-9_-]{20}$/;
const REFUND_ID = /^re_[A-Za-z0-9_-]{20}$/;

/** A well-shaped payment id that names nothing. */
const unknownPaymentId = () => `pay_${randomBytes(15).toString("base64url")}`;

describe("e2e: payments and refunds through the gateway", function () {
  this.timeout(30_000);

  let env: E2eMesh;
  let api: Api;
  let alice: string;
  let bob: string;
  let carol: string;
  const userIds: Record<"alice" | "bob", number> = { alice: 0, bob: 0 };

  before(async function () {
    this.timeout(90_000);
    env = await startE2eMesh("payments");
    api = env.api;
    [alice, bob, carol] = await Promise.all([api.login(ALICE), api.login(BOB), api.login(CAROL)]);
    const users = await api.listAll("/v1/tenants/acme/users", alice);
    userIds.alice = users.find((u) => u.email === ALICE.email)!.id;
    userIds.bob = users.find((u) => u.email === BOB.email)!.id;
  });

  after(async function () {
    this.timeout(30_000);
    await env?.stop();
  });

  const paymentBody = (overrides: Record<string, unknown> = {}) => ({
    amount: 100,
    currency: "EUR",
    source: `tok_${unique()}`,
    ...overrides,
  });

  async function createPayment(
    body: Record<string, unknown> = paymentBody(),
    token = alice,
    key = newKey(),
  ): Promise<ApiResponse> {
    const res = await api.post("/v1/payments", { token, key, json: body });
    expect(res.status, res.text).to.equal(201);
    return res;
  }

  const listPayments = (token = alice) => api.listAll("/v1/payments", token);
  const getPayment = async (id: string, token = alice) => {
    const res = await api.get(`/v1/payments/${id}`, { token });
    expect(res.status, res.text).to.equal(200);
    return res.json;
  };
  const refund = (paymentId: string, body: Record<string, unknown>, key = newKey(), token = alice) =>
    api.post(`/v1/payments/${paymentId}/refunds`, { token, key, json: body });

  describe("creating payments", () => {
    it("answers 201 + Location with the payment, and GET Location returns the same", async () => {
      const body = { amount: 1234, currency: "EUR", source: `tok_visa_${unique()}` };
      const res = await createPayment(body);
      expect(Object.keys(res.json).sort()).to.deep.equal(PAYMENT_KEYS);
      expect(res.json.id).to.match(PAYMENT_ID);
      // Made by a user through the API: it is theirs, and it is for nothing a service names.
      expect(res.json).to.include({
        amount: 1234,
        currency: "EUR",
        source: body.source,
        status: "succeeded",
        amount_refunded: 0,
        user_id: userIds.alice,
        reference: null,
      });
      expect(Date.parse(res.json.created_at)).to.be.closeTo(Date.now(), 60_000);
      expect(res.headers.get("location")).to.equal(`/v1/payments/${res.json.id}`);
      expect(res.headers.get("idempotent-replayed")).to.equal(null);
      const got = await api.get(res.headers.get("location")!, { token: alice });
      expect(got.status, got.text).to.equal(200);
      expect(got.json).to.deep.equal(res.json);
    });

    it("replays the same key and body: 200, identical body, same Location, Idempotent-Replayed: true, one payment", async () => {
      const key = newKey();
      const body = paymentBody({ amount: 4321 });
      const first = await createPayment(body, alice, key);
      const again = await api.post("/v1/payments", { token: alice, key, json: body });
      expect(again.status, again.text).to.equal(200);
      expect(again.text).to.equal(first.text);
      expect(again.headers.get("location")).to.equal(first.headers.get("location"));
      expect(again.headers.get("idempotent-replayed")).to.equal("true");
      // The same body with its fields in another order is the same request.
      const reordered = await api.post("/v1/payments", {
        token: alice,
        key,
        json: { source: body.source, currency: body.currency, amount: body.amount },
      });
      expect(reordered.status, reordered.text).to.equal(200);
      expect(reordered.json).to.deep.equal(first.json);
      const matching = (await listPayments()).filter((p) => p.source === body.source);
      expect(matching).to.have.length(1);
      expect(matching[0]).to.deep.equal(first.json);
    });

    it("refuses the same key with another body (422 IDEMPOTENCY_KEY_REUSED) and creates nothing", async () => {
      const key = newKey();
      const body = paymentBody();
      const first = await createPayment(body, alice, key);
      const before = await listPayments();
      for (const other of [
        { ...body, amount: 101 },
        { ...body, currency: "USD" },
        { ...body, source: `${body.source}x` },
      ]) {
        expectError(await api.post("/v1/payments", { token: alice, key, json: other }), 422, "IDEMPOTENCY_KEY_REUSED");
      }
      expect(await listPayments()).to.deep.equal(before);
      expect(await getPayment(first.json.id)).to.deep.equal(first.json);
    });

    it("requires an Idempotency-Key that is a UUID (400), and creates nothing", async () => {
      const before = await listPayments();
      const missing = await api.post("/v1/payments", { token: alice, json: paymentBody() });
      expect(missing.status, missing.text).to.equal(400);
      expect(missing.json.code).to.be.oneOf(["INVALID_REQUEST", "IDEMPOTENCY_KEY_INVALID"]);
      expectError(missing, 400, missing.json.code);
      for (const key of [
        "not-a-uuid",
        "",
        "12345678-1234-1234-1234-1234567890ab0",
        "{12345678-1234-1234-1234-1234567890ab}",
      ]) {
        const res = await api.post("/v1/payments", { token: alice, key, json: paymentBody() });
        expect(res.status, `key ${JSON.stringify(key)}: ${res.text}`).to.equal(400);
        expect(res.json.code).to.be.oneOf(["INVALID_REQUEST", "IDEMPOTENCY_KEY_INVALID"]);
      }
      expect(await listPayments()).to.deep.equal(before);
    });

    it("20 concurrent POSTs with one key: exactly one 201, the rest 200 with the identical body, one payment", async () => {
      const key = newKey();
      const body = paymentBody({ amount: 777 });
      const results = await Promise.all(
        Array.from({ length: 20 }, () => api.post("/v1/payments", { token: alice, key, json: body })),
      );
      const statuses = results.map((r) => r.status).sort((a, b) => a - b);
      expect(statuses, results.map((r) => `${r.status} ${r.text}`).join("\n")).to.deep.equal([
        ...Array<number>(19).fill(200),
        201,
      ]);
      const first = results.find((r) => r.status === 201)!;
      for (const r of results) {
        expect(r.text).to.equal(first.text);
        expect(r.headers.get("location")).to.equal(first.headers.get("location"));
        if (r.status === 200) expect(r.headers.get("idempotent-replayed")).to.equal("true");
      }
      const matching = (await listPayments()).filter((p) => p.source === body.source);
      expect(matching.map((p) => p.id)).to.deep.equal([first.json.id]);
    });

    it("scopes keys to the tenant: globex's use of acme's key creates a separate payment", async () => {
      const key = newKey();
      const body = paymentBody({ amount: 555 });
      const acme = await createPayment(body, alice, key);
      const globex = await api.post("/v1/payments", { token: carol, key, json: body });
      expect(globex.status, globex.text).to.equal(201);
      expect(globex.headers.get("idempotent-replayed")).to.equal(null);
      expect(globex.json.id).to.match(PAYMENT_ID).and.not.equal(acme.json.id);
      expect((await listPayments(carol)).map((p) => p.id))
        .to.include(globex.json.id)
        .and.not.include(acme.json.id);
      expect((await listPayments(alice)).map((p) => p.id))
        .to.include(acme.json.id)
        .and.not.include(globex.json.id);
      // And each tenant replays its own.
      const replay = await api.post("/v1/payments", { token: carol, key, json: body });
      expect(replay.status).to.equal(200);
      expect(replay.json.id).to.equal(globex.json.id);
    });

    it("never shows another tenant's payment: 404, and none of its data", async () => {
      const mine = await createPayment(paymentBody({ source: `tok_secret_${unique()}` }));
      const id = mine.json.id as string;
      for (const res of [
        await api.get(`/v1/payments/${id}`, { token: carol }),
        await api.get(`/v1/payments/${id}/refunds`, { token: carol }),
        await refund(id, { amount: 1 }, newKey(), carol),
      ]) {
        expectError(res, 404, "NOT_FOUND");
        expect(res.text).not.to.include(mine.json.source);
      }
      expect(await getPayment(id)).to.deep.equal(mine.json);
    });

    it("answers an unknown or malformed payment id with 404", async () => {
      expectError(await api.get(`/v1/payments/${unknownPaymentId()}`, { token: alice }), 404, "NOT_FOUND");
      expectError(await api.get("/v1/payments/nope", { token: alice }), 404, "NOT_FOUND");
      expectError(await api.get("/v1/payments/re_AAAAAAAAAAAAAAAAAAAA", { token: alice }), 404, "NOT_FOUND");
    });
  });

  describe("who may see and refund what", () => {
    let alices: ApiResponse;
    let bobs: ApiResponse;

    before(async () => {
      alices = await createPayment(paymentBody({ amount: 2_000, source: `tok_alice_${unique()}` }), alice);
      bobs = await createPayment(paymentBody({ amount: 1_000, source: `tok_bob_${unique()}` }), bob);
    });

    it("a member's payment is theirs: user_id set, readable by them and by an admin", async () => {
      expect(Object.keys(bobs.json).sort()).to.deep.equal(PAYMENT_KEYS);
      expect(bobs.json).to.include({ amount: 1_000, user_id: userIds.bob, reference: null, status: "succeeded" });
      expect(await getPayment(bobs.json.id, bob)).to.deep.equal(bobs.json);
      expect(await getPayment(bobs.json.id, alice)).to.deep.equal(bobs.json);
    });

    it("a member lists only their own payments; an admin lists every payment of the tenant", async () => {
      const mine = await listPayments(bob);
      expect(mine.map((p) => p.id))
        .to.include(bobs.json.id)
        .and.not.include(alices.json.id);
      expect(
        mine.every((p) => p.user_id === userIds.bob),
        "only bob's",
      ).to.equal(true);
      expect((await listPayments(alice)).map((p) => p.id)).to.include.members([bobs.json.id, alices.json.id]);
    });

    it("another user's payment is 404 for a member (GET, its refunds, one refund) and never its data", async () => {
      const refunded = await refund(alices.json.id, { amount: 10, reason: "for the member test" });
      expect(refunded.status, refunded.text).to.equal(201);
      for (const res of [
        await api.get(`/v1/payments/${alices.json.id}`, { token: bob }),
        await api.get(`/v1/payments/${alices.json.id}/refunds`, { token: bob }),
        await api.get(`/v1/payments/${alices.json.id}/refunds/${refunded.json.id}`, { token: bob }),
      ]) {
        expectError(res, 404, "NOT_FOUND");
        expect(res.text).not.to.include(alices.json.source);
        expect(res.text).not.to.include("for the member test");
      }
    });

    it("refunds are admin-only: 403 ROLE_REQUIRED for a member, on their own payment too, and nothing is refunded; an admin refunds it and the member sees the refund", async () => {
      expectError(await refund(bobs.json.id, { amount: 100 }, newKey(), bob), 403, "ROLE_REQUIRED");
      expectError(await refund(alices.json.id, { amount: 1 }, newKey(), bob), 403, "ROLE_REQUIRED");
      expect(await getPayment(bobs.json.id, bob)).to.include({ amount_refunded: 0, status: "succeeded" });
      expect(await api.listAll(`/v1/payments/${bobs.json.id}/refunds`, bob)).to.deep.equal([]);

      const byAdmin = await refund(bobs.json.id, { amount: 100, reason: "goodwill" });
      expect(byAdmin.status, byAdmin.text).to.equal(201);
      expect(await getPayment(bobs.json.id, bob)).to.include({
        amount_refunded: 100,
        status: "partially_refunded",
        user_id: userIds.bob,
      });
      expect(await api.listAll(`/v1/payments/${bobs.json.id}/refunds`, bob)).to.deep.equal([byAdmin.json]);
      const one = await api.get(`/v1/payments/${bobs.json.id}/refunds/${byAdmin.json.id}`, { token: bob });
      expect(one.status, one.text).to.equal(200);
      expect(one.json).to.deep.equal(byAdmin.json);
    });

    it("a member's payment list is another list than the tenant's: neither's cursor is taken by the other (400 INVALID_CURSOR)", async () => {
      await createPayment(paymentBody(), bob);
      const bobsPage = await api.get("/v1/payments?limit=1", { token: bob });
      const alicesPage = await api.get("/v1/payments?limit=1", { token: alice });
      expect(bobsPage.json.next_cursor).to.be.a("string");
      expect(alicesPage.json.next_cursor).to.be.a("string");
      expectError(
        await api.get(`/v1/payments?cursor=${alicesPage.json.next_cursor}`, { token: bob }),
        400,
        "INVALID_CURSOR",
      );
      expectError(
        await api.get(`/v1/payments?cursor=${bobsPage.json.next_cursor}`, { token: alice }),
        400,
        "INVALID_CURSOR",
      );
    });

    it("no client names a payment's owner or reference (400: not fields of a new payment)", async () => {
      const before = await listPayments(alice);
      for (const extra of [{ user_id: userIds.bob }, { reference: "order:1" }]) {
        expectError(
          await api.post("/v1/payments", { token: alice, key: newKey(), json: { ...paymentBody(), ...extra } }),
          400,
          "INVALID_REQUEST",
        );
        expectError(
          await api.post("/v1/payments", { token: bob, key: newKey(), json: { ...paymentBody(), ...extra } }),
          400,
          "INVALID_REQUEST",
        );
      }
      expect(await listPayments(alice)).to.deep.equal(before);
    });
  });

  describe("refunds", () => {
    let payment: { id: string; amount: number };
    let firstRefund: ApiResponse;
    let firstRefundKey: string;

    before(async () => {
      payment = (await createPayment(paymentBody({ amount: 100 }))).json;
    });

    it("refunds part: 201 + Location, and the payment becomes partially_refunded", async () => {
      firstRefundKey = newKey();
      firstRefund = await refund(payment.id, { amount: 30, reason: "damaged" }, firstRefundKey);
      expect(firstRefund.status, firstRefund.text).to.equal(201);
      expect(Object.keys(firstRefund.json).sort()).to.deep.equal(REFUND_KEYS);
      expect(firstRefund.json.id).to.match(REFUND_ID);
      expect(firstRefund.json).to.include({ payment_id: payment.id, amount: 30, currency: "EUR", reason: "damaged" });
      expect(firstRefund.headers.get("location")).to.equal(`/v1/payments/${payment.id}/refunds/${firstRefund.json.id}`);
      expect(await getPayment(payment.id)).to.include({
        status: "partially_refunded",
        amount_refunded: 30,
        amount: 100,
      });
    });

    it("replays a refund: 200, same body and Location, nothing refunded twice", async () => {
      const again = await refund(payment.id, { amount: 30, reason: "damaged" }, firstRefundKey);
      expect(again.status, again.text).to.equal(200);
      expect(again.text).to.equal(firstRefund.text);
      expect(again.headers.get("location")).to.equal(firstRefund.headers.get("location"));
      expect(again.headers.get("idempotent-replayed")).to.equal("true");
      expect(await getPayment(payment.id)).to.include({ amount_refunded: 30 });
      expectError(
        await refund(payment.id, { amount: 31, reason: "damaged" }, firstRefundKey),
        422,
        "IDEMPOTENCY_KEY_REUSED",
      );
      expect(await getPayment(payment.id)).to.include({ amount_refunded: 30 });
    });

    it("refuses a refund beyond the refundable rest with 422 REFUND_EXCEEDS_REFUNDABLE, and nothing changes", async () => {
      const before = await getPayment(payment.id);
      const refundsBefore = await api.listAll(`/v1/payments/${payment.id}/refunds`, alice);
      expectError(await refund(payment.id, { amount: 71 }), 422, "REFUND_EXCEEDS_REFUNDABLE");
      expectError(await refund(payment.id, { amount: 100_000 }), 422, "REFUND_EXCEEDS_REFUNDABLE");
      expect(await getPayment(payment.id)).to.deep.equal(before);
      expect(await api.listAll(`/v1/payments/${payment.id}/refunds`, alice)).to.deep.equal(refundsBefore);
    });

    it("refuses a refund without a key (400) or with a non-positive amount (422)", async () => {
      const missing = await api.post(`/v1/payments/${payment.id}/refunds`, { token: alice, json: { amount: 1 } });
      expect(missing.status, missing.text).to.equal(400);
      expectError(await refund(payment.id, { amount: 0 }), 422, "RULE_VIOLATION");
      expectError(await refund(payment.id, { amount: -5 }), 422, "RULE_VIOLATION");
      expect(await getPayment(payment.id)).to.include({ amount_refunded: 30 });
    });

    it("refunds the rest: status refunded, then no more refunds", async () => {
      const res = await refund(payment.id, { amount: 70 });
      expect(res.status, res.text).to.equal(201);
      expect(res.json.reason).to.equal(null);
      expect(await getPayment(payment.id)).to.include({ status: "refunded", amount_refunded: 100 });
      expectError(await refund(payment.id, { amount: 1 }), 422, "REFUND_EXCEEDS_REFUNDABLE");
    });

    it("lists the refunds newest first and GETs each", async () => {
      const items = await api.listAll(`/v1/payments/${payment.id}/refunds`, alice);
      expect(items.map((r) => r.amount)).to.deep.equal([70, 30]);
      expect(items[1]).to.deep.equal(firstRefund.json);
      for (const item of items) {
        const got = await api.get(`/v1/payments/${payment.id}/refunds/${item.id}`, { token: alice });
        expect(got.status, got.text).to.equal(200);
        expect(got.json).to.deep.equal(item);
      }
      // A refund is addressed under its own payment only.
      const other = (await createPayment()).json.id as string;
      expectError(
        await api.get(`/v1/payments/${other}/refunds/${firstRefund.json.id}`, { token: alice }),
        404,
        "NOT_FOUND",
      );
      expectError(
        await api.get(`/v1/payments/${payment.id}/refunds/${firstRefund.json.id}`, { token: carol }),
        404,
        "NOT_FOUND",
      );
      expectError(
        await api.get(`/v1/payments/${payment.id}/refunds/re_AAAAAAAAAAAAAAAAAAAA`, { token: alice }),
        404,
        "NOT_FOUND",
      );
    });

    it("answers refunds of an unknown payment with 404", async () => {
      const id = unknownPaymentId();
      expectError(await refund(id, { amount: 1 }), 404, "NOT_FOUND");
      expectError(await api.get(`/v1/payments/${id}/refunds`, { token: alice }), 404, "NOT_FOUND");
      expectError(await refund("nope", { amount: 1 }), 404, "NOT_FOUND");
    });

    it("10 concurrent refunds of 30 on a payment of 100: exactly 3 succeed, 90 refunded", async () => {
      const p = (await createPayment(paymentBody({ amount: 100 }))).json;
      const results = await Promise.all(Array.from({ length: 10 }, () => refund(p.id, { amount: 30 })));
      const created = results.filter((r) => r.status === 201);
      const refused = results.filter((r) => r.status !== 201);
      expect(created, results.map((r) => `${r.status} ${r.text}`).join("\n")).to.have.length(3);
      expect(refused).to.have.length(7);
      for (const r of refused) expectError(r, 422, "REFUND_EXCEEDS_REFUNDABLE");
      expect(await getPayment(p.id)).to.include({ amount_refunded: 90, status: "partially_refunded" });
      const listed = await api.listAll(`/v1/payments/${p.id}/refunds`, alice);
      expect(listed.map((r) => r.id).sort()).to.deep.equal(created.map((r) => r.json.id).sort());
    });
  });

  describe("paging", () => {
    before(async () => {
      // Concurrently, so several share a created_at millisecond and the id tiebreaker is exercised.
      await Promise.all(Array.from({ length: 10 }, () => createPayment()));
    });

    it("pages with limit=2 while payments are inserted between pages: no duplicate, no gap", async () => {
      const existing = (await listPayments()).map((p) => p.id as string);
      expect(existing.length).to.be.greaterThan(10);
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const res: ApiResponse = await api.get(`/v1/payments?limit=2${cursor ? `&cursor=${cursor}` : ""}`, {
          token: alice,
        });
        expect(res.status, res.text).to.equal(200);
        expect(res.json.items.length).to.be.within(1, 2);
        seen.push(...res.json.items.map((p: { id: string }) => p.id));
        cursor = res.json.next_cursor;
        if (cursor) expect(res.headers.get("link")).to.include(`cursor=${cursor}`).and.include('rel="next"');
        else expect(res.headers.get("link")).to.equal(null);
        // Inserted between pages: newer than every position still to come.
        await createPayment();
        pages++;
      } while (cursor !== null && pages < 200);
      expect(new Set(seen).size, "no duplicates").to.equal(seen.length);
      expect(seen).to.deep.equal(existing);
      expect((await listPayments()).length).to.equal(existing.length + pages);
    });

    it("refuses a malformed cursor with 400 INVALID_CURSOR", async () => {
      for (const cursor of [
        "garbage!!",
        "abc",
        Buffer.from('{"v":1,"c":"payments:acme","t":"x","i":"y"}').toString("base64url"),
        Buffer.from("not json").toString("base64url"),
      ]) {
        expectError(
          await api.get(`/v1/payments?cursor=${encodeURIComponent(cursor)}`, { token: alice }),
          400,
          "INVALID_CURSOR",
        );
      }
    });

    it("refuses a cursor of another list with 400: refunds' cursor on payments, globex's on acme", async () => {
      const p = (await createPayment(paymentBody({ amount: 10 }))).json;
      for (let i = 0; i < 2; i++) expect((await refund(p.id, { amount: 1 })).status).to.equal(201);
      const refundsPage = await api.get(`/v1/payments/${p.id}/refunds?limit=1`, { token: alice });
      expect(refundsPage.json.next_cursor).to.be.a("string");
      expectError(
        await api.get(`/v1/payments?cursor=${refundsPage.json.next_cursor}`, { token: alice }),
        400,
        "INVALID_CURSOR",
      );

      const paymentsPage = await api.get("/v1/payments?limit=1", { token: alice });
      expect(paymentsPage.json.next_cursor).to.be.a("string");
      expectError(
        await api.get(`/v1/payments/${p.id}/refunds?cursor=${paymentsPage.json.next_cursor}`, { token: alice }),
        400,
        "INVALID_CURSOR",
      );
      // acme's payments cursor is no key to globex's list.
      expectError(
        await api.get(`/v1/payments?cursor=${paymentsPage.json.next_cursor}`, { token: carol }),
        400,
        "INVALID_CURSOR",
      );
    });

    for (const limit of ["0", "101", "abc", "-1", "1.5", ""]) {
      it(`refuses limit=${limit} with 400`, async () => {
        expectError(await api.get(`/v1/payments?limit=${limit}`, { token: alice }), 400, "INVALID_REQUEST");
      });
    }

    it("refuses a repeated limit with 400, and accepts limit=1 and limit=100", async () => {
      expectError(await api.get("/v1/payments?limit=1&limit=2", { token: alice }), 400, "INVALID_REQUEST");
      expect((await api.get("/v1/payments?limit=1", { token: alice })).json.items).to.have.length(1);
      const hundred = await api.get("/v1/payments?limit=100", { token: alice });
      expect(hundred.status).to.equal(200);
    });

    it("defaults to 20 items a page", async () => {
      const res = await api.get("/v1/payments", { token: alice });
      expect(res.status).to.equal(200);
      expect(res.json.items).to.have.length(20);
      expect(res.json.next_cursor).to.be.a("string");
    });
  });
});
