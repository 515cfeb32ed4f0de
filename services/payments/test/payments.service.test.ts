// PaymentService over real gRPC, with identity issuing the tokens: idempotency, refunds, tenancy.
import { expect } from "chai";
import { randomUUID } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { KeyedOperation, PaymentStatus } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import { SERVICE_AUTHORIZATION } from "@switchyard/platform/caller.js";
import { serviceEngines, startInProcessMesh, type InProcessMesh } from "../../platform/test/support/in-process-mesh.js";

async function failure(promise: Promise<unknown>): Promise<{ code: Code; reason: string | undefined }> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, "the call should have failed").to.be.instanceOf(ConnectError);
  return { code: (err as ConnectError).code, reason: errorInfoOf(err as ConnectError)?.reason };
}

for (const engine of serviceEngines()) {
  describe(`payments service over gRPC (${engine.name})`, function () {
    this.timeout(60_000);
    let mesh: InProcessMesh;
    let alice: { headers: { authorization: string } };
    let carol: { headers: { authorization: string } };

    before(async () => {
      mesh = await startInProcessMesh({ databaseUrl: engine.databaseUrl });
      alice = { headers: await mesh.login("alice@acme.test") };
      carol = { headers: await mesh.login("carol@globex.test") };
    });
    after(async () => mesh?.stop());

    const create = (key: string, amount = 1000n, opts = alice) =>
      mesh.payments.createPayment({ idempotencyKey: key, amount, currency: "EUR", source: "tok_visa" }, opts);

    it("creates a payment once per key: N concurrent calls, one payment; the others replay it or are told it is in flight (409)", async () => {
      const key = randomUUID();
      const settled = await Promise.allSettled(Array.from({ length: 15 }, () => create(key, 4242n)));
      const results = settled.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
      for (const r of settled)
        if (r.status === "rejected")
          expect(errorInfoOf(r.reason as ConnectError)?.reason).to.equal("IDEMPOTENCY_KEY_IN_FLIGHT");
      const ids = new Set(results.map((r) => r.payment!.id));
      expect(ids.size).to.equal(1);
      expect(results.filter((r) => !r.replayed)).to.have.length(1);
      // Retried once the first is done, every one of them replays it.
      const again = await create(key, 4242n);
      expect([again.replayed, again.payment!.id]).to.deep.equal([true, [...ids][0]]);
      const listed = await mesh.payments.listPayments({ pageSize: 100 }, alice);
      expect(listed.payments.filter((p) => p.amount === 4242n)).to.have.length(1);
    });

    it("refuses the same key with another request, and a key that is not a UUID", async () => {
      const key = randomUUID();
      await create(key, 100n);
      expect(await failure(create(key, 101n))).to.deep.equal({
        code: Code.InvalidArgument,
        reason: "IDEMPOTENCY_KEY_REUSED",
      });
      expect(await failure(create("not-a-uuid"))).to.deep.equal({
        code: Code.InvalidArgument,
        reason: "IDEMPOTENCY_KEY_INVALID",
      });
    });

    it("applies the payment rules", async () => {
      expect((await failure(create(randomUUID(), 0n))).reason).to.equal("RULE_VIOLATION");
      expect(
        (
          await failure(
            mesh.payments.createPayment(
              { idempotencyKey: randomUUID(), amount: 5n, currency: "eur", source: "x" },
              alice,
            ),
          )
        ).reason,
      ).to.equal("RULE_VIOLATION");
      expect(
        (
          await failure(
            mesh.payments.createPayment(
              { idempotencyKey: randomUUID(), amount: 5n, currency: "XYZ", source: "x" },
              alice,
            ),
          )
        ).reason,
      ).to.equal("RULE_VIOLATION");
      expect(
        (
          await failure(
            mesh.payments.createPayment(
              { idempotencyKey: randomUUID(), amount: 5n, currency: "EUR", source: "" },
              alice,
            ),
          )
        ).reason,
      ).to.equal("RULE_VIOLATION");
    });

    it("keeps tenants apart: another tenant's payment is not found, keys are per tenant", async () => {
      const key = randomUUID();
      const mine = await create(key);
      const theirs = await create(key, 1000n, carol);
      expect(theirs.payment!.id).to.not.equal(mine.payment!.id);
      expect(theirs.replayed).to.equal(false);
      expect(await failure(mesh.payments.getPayment({ paymentId: mine.payment!.id }, carol))).to.deep.equal({
        code: Code.NotFound,
        reason: "NOT_FOUND",
      });
    });

    it("verifies the token itself: none, garbage and forged tokens are refused", async () => {
      expect((await failure(mesh.payments.listPayments({}))).code).to.equal(Code.Unauthenticated);
      expect(
        (await failure(mesh.payments.listPayments({}, { headers: { authorization: "Bearer garbage" } }))).code,
      ).to.equal(Code.Unauthenticated);
      const [header, payload] = alice.headers.authorization.slice(7).split(".");
      const claims = JSON.parse(Buffer.from(payload!, "base64url").toString()) as Record<string, unknown>;
      const forged = Buffer.from(JSON.stringify({ ...claims, tid: "globex" })).toString("base64url");
      expect(
        (
          await failure(
            mesh.payments.listPayments(
              {},
              { headers: { authorization: `Bearer ${header}.${forged}.${alice.headers.authorization.split(".")[2]}` } },
            ),
          )
        ).code,
      ).to.equal(Code.Unauthenticated);
      const none = Buffer.from(JSON.stringify({ alg: "none", typ: "JWT" })).toString("base64url");
      expect(
        (await failure(mesh.payments.listPayments({}, { headers: { authorization: `Bearer ${none}.${payload}.` } })))
          .code,
      ).to.equal(Code.Unauthenticated);
    });

    it("never refunds more than the refundable rest, even concurrently", async () => {
      const { payment } = await create(randomUUID(), 100n);
      const attempts = await Promise.allSettled(
        Array.from({ length: 8 }, () =>
          mesh.payments.createRefund({ idempotencyKey: randomUUID(), paymentId: payment!.id, amount: 30n }, alice),
        ),
      );
      const ok = attempts.filter((a) => a.status === "fulfilled");
      expect(ok).to.have.length(3);
      for (const a of attempts)
        if (a.status === "rejected")
          expect(errorInfoOf(a.reason as ConnectError)?.reason).to.equal("REFUND_EXCEEDS_REFUNDABLE");
      const after = await mesh.payments.getPayment({ paymentId: payment!.id }, alice);
      expect(after.payment!.amountRefunded).to.equal(90n);
      expect(after.payment!.status).to.equal(PaymentStatus.PARTIALLY_REFUNDED);
      await mesh.payments.createRefund(
        { idempotencyKey: randomUUID(), paymentId: payment!.id, amount: 10n, reason: "rest" },
        alice,
      );
      expect((await mesh.payments.getPayment({ paymentId: payment!.id }, alice)).payment!.status).to.equal(
        PaymentStatus.REFUNDED,
      );
      const refunds = await mesh.payments.listRefunds({ paymentId: payment!.id, pageSize: 2 }, alice);
      expect(refunds.refunds).to.have.length(2);
      expect(refunds.nextPageToken).to.not.equal("");
    });

    it("replays a refund with the same key without refunding twice", async () => {
      const { payment } = await create(randomUUID(), 500n);
      const key = randomUUID();
      const first = await mesh.payments.createRefund(
        { idempotencyKey: key, paymentId: payment!.id, amount: 200n },
        alice,
      );
      const again = await mesh.payments.createRefund(
        { idempotencyKey: key, paymentId: payment!.id, amount: 200n },
        alice,
      );
      expect(again.replayed).to.equal(true);
      expect(again.refund!.id).to.equal(first.refund!.id);
      expect((await mesh.payments.getPayment({ paymentId: payment!.id }, alice)).payment!.amountRefunded).to.equal(
        200n,
      );
      expect(
        await failure(
          mesh.payments.createRefund(
            { idempotencyKey: randomUUID(), paymentId: "pay_AAAAAAAAAAAAAAAAAAAA", amount: 1n },
            alice,
          ),
        ),
      ).to.deep.equal({ code: Code.NotFound, reason: "NOT_FOUND" });
    });

    it("pages payments newest first with a keyset cursor, refusing a foreign cursor", async () => {
      for (let i = 0; i < 5; i++) await create(randomUUID(), BigInt(10 + i));
      const first = await mesh.payments.listPayments({ pageSize: 2 }, alice);
      const second = await mesh.payments.listPayments({ pageSize: 2, pageToken: first.nextPageToken }, alice);
      expect(first.payments).to.have.length(2);
      expect(second.payments[0]!.id).to.not.equal(first.payments[1]!.id);
      const t = (p: { createTime?: { seconds: bigint; nanos: number } }) =>
        Number(p.createTime!.seconds) * 1e3 + p.createTime!.nanos / 1e6;
      expect(t(first.payments[1]!)).to.be.at.least(t(second.payments[0]!));
      expect(await failure(mesh.payments.listPayments({ pageToken: first.nextPageToken }, carol))).to.deep.equal({
        code: Code.InvalidArgument,
        reason: "INVALID_CURSOR",
      });
      expect((await failure(mesh.payments.listPayments({ pageSize: 101 }, alice))).reason).to.equal("INVALID_REQUEST");
    });

    describe("as the orders service (its own token)", () => {
      let asOrders: { headers: Record<string, string> };
      let bob: { headers: { authorization: string } };
      before(async () => {
        const { accessToken } = await mesh.identity.createServiceToken({
          clientId: "orders",
          clientSecret: mesh.ordersSecret,
        });
        asOrders = { headers: { [SERVICE_AUTHORIZATION]: `Bearer ${accessToken}` } };
        bob = { headers: await mesh.login("bob@acme.test") };
      });
      const resolve = (
        operation: KeyedOperation,
        idempotencyKey: string,
        tenantId = "acme",
        auth: { headers: Record<string, string> } = asOrders,
      ) => mesh.payments.resolveIdempotencyKey({ tenantId, operation, idempotencyKey }, auth);

      /** Alice's call with the orders service's token beside hers: orders acting with its own authority. */
      const ordersForAlice = () => ({ headers: { ...alice.headers, ...asOrders.headers } });

      it("resolves one of its own keys to the payment or refund made with it", async () => {
        const key = randomUUID();
        const { payment } = await mesh.payments.createPayment(
          { idempotencyKey: key, amount: 700n, currency: "EUR", source: "tok_visa", reference: "order:1" },
          ordersForAlice(),
        );
        expect((await resolve(KeyedOperation.CREATE_PAYMENT, key)).outcome).to.deep.include({ case: "payment" });
        expect(((await resolve(KeyedOperation.CREATE_PAYMENT, key)).outcome.value as { id: string }).id).to.equal(
          payment!.id,
        );
        const refundKey = randomUUID();
        const { refund } = await mesh.payments.createRefund(
          { idempotencyKey: refundKey, paymentId: payment!.id, amount: 100n },
          ordersForAlice(),
        );
        const found = (await resolve(KeyedOperation.CREATE_REFUND, refundKey)).outcome;
        expect([found.case, (found.value as { id: string }).id]).to.deep.equal(["refund", refund!.id]);
        expect(
          (await resolve(KeyedOperation.CREATE_PAYMENT, key, "globex")).outcome,
          "keys are per tenant",
        ).to.deep.equal({ case: "voided", value: true });
      });

      it("resolves only its own keys: a user's key of the same value is another key, and stays the user's", async () => {
        const key = randomUUID();
        const { payment } = await create(key, 800n);
        expect(
          (await resolve(KeyedOperation.CREATE_PAYMENT, key)).outcome,
          "orders learns nothing of alice's key",
        ).to.deep.equal({ case: "voided", value: true });
        const again = await create(key, 800n);
        expect([again.replayed, again.payment!.id], "alice's key still replays her payment").to.deep.equal([
          true,
          payment!.id,
        ]);
        // And a user's key never lands in orders' scope: orders' own payment under that value is a first one.
        const orders = await mesh.payments.createPayment(
          { idempotencyKey: randomUUID(), amount: 800n, currency: "EUR", source: "tok_visa", reference: "order:2" },
          ordersForAlice(),
        );
        expect(orders.replayed).to.equal(false);
      });

      it("voids an unused key of its own: a later payment of its with it is refused and nothing is charged", async () => {
        const key = randomUUID();
        expect((await resolve(KeyedOperation.CREATE_PAYMENT, key)).outcome).to.deep.equal({
          case: "voided",
          value: true,
        });
        expect(
          await failure(
            mesh.payments.createPayment(
              { idempotencyKey: key, amount: 900n, currency: "EUR", source: "tok_visa", reference: "order:3" },
              ordersForAlice(),
            ),
          ),
        ).to.deep.equal({
          code: Code.FailedPrecondition,
          reason: "IDEMPOTENCY_KEY_VOIDED",
        });
        const listed = await mesh.payments.listPayments({ pageSize: 100 }, alice);
        expect(listed.payments.filter((p) => p.amount === 900n)).to.have.length(0);
        // A user's key of the same value is the user's: voiding orders' key blocks nothing of theirs.
        expect((await create(key, 901n)).replayed).to.equal(false);
      });

      it("lets only the orders service resolve keys, never a user (admin included)", async () => {
        expect((await failure(resolve(KeyedOperation.CREATE_PAYMENT, randomUUID(), "acme", alice))).code).to.equal(
          Code.Unauthenticated,
        );
        expect(
          (
            await failure(
              resolve(KeyedOperation.CREATE_PAYMENT, randomUUID(), "acme", {
                headers: { [SERVICE_AUTHORIZATION]: alice.headers.authorization },
              }),
            )
          ).code,
        ).to.equal(Code.Unauthenticated);
        expect((await failure(resolve(KeyedOperation.UNSPECIFIED, randomUUID()))).reason).to.equal("INVALID_REQUEST");
        expect((await failure(resolve(KeyedOperation.CREATE_PAYMENT, randomUUID(), "Not A Tenant"))).reason).to.equal(
          "INVALID_REQUEST",
        );
      });

      it("lets a member refund only with the orders service's token beside theirs, and refunds what is left", async () => {
        const { payment } = await mesh.payments.createPayment(
          { idempotencyKey: randomUUID(), amount: 1000n, currency: "EUR", source: "tok_visa" },
          bob,
        );
        expect(payment!.ownerUserId).to.not.equal(0n);
        expect(
          (
            await failure(
              mesh.payments.createRefund({ idempotencyKey: randomUUID(), paymentId: payment!.id, amount: 10n }, bob),
            )
          ).reason,
        ).to.equal("ROLE_REQUIRED");
        await mesh.payments.createRefund({ idempotencyKey: randomUUID(), paymentId: payment!.id, amount: 300n }, alice);
        const both = { headers: { ...bob.headers, ...asOrders.headers } };
        const rest = await mesh.payments.createRefund(
          { idempotencyKey: randomUUID(), paymentId: payment!.id, refundRemaining: true, reason: "order cancelled" },
          both,
        );
        expect(rest.refund!.amount).to.equal(700n);
        expect(
          (
            await failure(
              mesh.payments.createRefund(
                { idempotencyKey: randomUUID(), paymentId: payment!.id, refundRemaining: true },
                both,
              ),
            )
          ).reason,
        ).to.equal("NOTHING_TO_REFUND");
        expect(
          (
            await failure(
              mesh.payments.createRefund(
                { idempotencyKey: randomUUID(), paymentId: payment!.id, refundRemaining: true, amount: 5n },
                both,
              ),
            )
          ).reason,
        ).to.equal("INVALID_REQUEST");
        expect((await mesh.payments.getPayment({ paymentId: payment!.id }, bob)).payment!.status).to.equal(
          PaymentStatus.REFUNDED,
        );
      });

      it("shows a member only their own payments; an admin all of the tenant's", async () => {
        const { payment: bobs } = await mesh.payments.createPayment(
          { idempotencyKey: randomUUID(), amount: 1234n, currency: "EUR", source: "tok_visa" },
          bob,
        );
        const { payment: alices } = await create(randomUUID(), 4321n);
        const bobList = (await mesh.payments.listPayments({ pageSize: 100 }, bob)).payments.map((p) => p.id);
        expect(bobList).to.include(bobs!.id).and.not.include(alices!.id);
        expect(
          (await mesh.payments.listPayments({ pageSize: 100 }, alice)).payments.map((p) => p.id),
        ).to.include.members([bobs!.id, alices!.id]);
        expect(await failure(mesh.payments.getPayment({ paymentId: alices!.id }, bob))).to.deep.equal({
          code: Code.NotFound,
          reason: "NOT_FOUND",
        });
        expect(await failure(mesh.payments.listRefunds({ paymentId: alices!.id }, bob))).to.deep.equal({
          code: Code.NotFound,
          reason: "NOT_FOUND",
        });
        const first = await mesh.payments.listPayments({ pageSize: 1 }, alice);
        expect(
          (await failure(mesh.payments.listPayments({ pageToken: first.nextPageToken }, bob))).reason,
          "the tenant's cursor is not a member's",
        ).to.equal("INVALID_CURSOR");
      });
    });
  });
}
