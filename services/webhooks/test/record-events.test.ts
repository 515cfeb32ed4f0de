// RecordEvents over real gRPC: a producing service records its events — each once by its id — and
// they are delivered to the endpoints of their tenant that asked for their type, the resource in its
// public v2 representation, signed (verified with the standardwebhooks package). A service records
// only its own types; a user cannot record any.
import { expect } from "chai";
import { randomBytes, randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { Webhook } from "standardwebhooks";
import { OrderSchema, OrderStatus } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { EventSchema, WebhookService } from "@switchyard/gen/switchyard/webhooks/v1/webhooks_pb.js";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import { orderJson } from "@switchyard/platform/representations/orders.js";
import { serviceEngines } from "../../platform/test/support/in-process-mesh.js";
import type { Client } from "@switchyard/platform/grpc";
import type { TestIdentity } from "../../identity/test/support/test-identity.js";
import { startReceiver, type TestReceiver } from "./support/receiver.js";
import { startTestWebhooks, type TestWebhooks } from "./support/test-webhooks.js";

const order = create(OrderSchema, {
  id: 42n,
  userId: 3n,
  status: OrderStatus.PAID,
  currency: "EUR",
  total: 900n,
  subtotal: 900n,
  paymentId: "pay_x",
  createTime: timestampFromDate(new Date("2026-11-28T10:00:00Z")),
  updateTime: timestampFromDate(new Date("2026-11-28T10:05:00Z")),
});
const orderPaid = (tenantId: string) =>
  create(EventSchema, {
    id: `evt_${randomBytes(15).toString("base64url")}`,
    type: "order.paid",
    tenantId,
    occurTime: timestampFromDate(new Date("2026-11-28T10:05:00Z")),
    resource: { case: "order", value: order },
  });

for (const engine of serviceEngines()) {
  describe(`webhooks: events recorded by their producers and delivered (${engine.name})`, function () {
    this.timeout(60_000);
    let receiver: TestReceiver;
    let started: TestWebhooks;
    let identity: TestIdentity;
    let webhooks: Client<typeof WebhookService>;

    before(async () => {
      receiver = await startReceiver();
      // The receiver is on this machine.
      started = await startTestWebhooks({
        databaseUrl: engine.databaseUrl,
        // The worker's poll at its longest: a delivery within seconds is the one RecordEvents woke it for.
        env: { WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8", WEBHOOK_ALLOW_PLAIN_HTTP: "true", WEBHOOK_POLL_MS: "60000" },
      });
      ({ identity, webhooks } = started);
    });
    after(async () => {
      await started?.stop();
      await receiver?.close();
    });

    it("records an event once and delivers it, signed, its data the order's v2 representation", async () => {
      const alice = await identity.login("alice@acme.test");
      const url = receiver.url;
      const made = await webhooks.createEndpoint(
        { idempotencyKey: randomUUID(), url, eventTypes: ["order.paid"] },
        alice,
      );
      const orders = await identity.asService("orders");
      const event = orderPaid("acme");
      expect((await webhooks.recordEvents({ events: [event] }, orders)).recorded).to.equal(1);
      expect((await webhooks.recordEvents({ events: [event] }, orders)).recorded, "sent again").to.equal(0);
      for (let i = 0; i < 100 && receiver.received.length === 0; i++) await sleep(50);
      expect(receiver.received).to.have.length(1);
      const payload = new Webhook(made.secret).verify(receiver.received[0]!.body, receiver.received[0]!.headers);
      expect(payload).to.deep.equal({
        id: event.id,
        type: "order.paid",
        timestamp: "2026-11-28T10:05:00.000Z",
        tenant_id: "acme",
        data: JSON.parse(JSON.stringify(orderJson(order))),
      });
      await sleep(200);
      expect(receiver.received, "once").to.have.length(1);
    });

    it("takes from a service only the types it makes, and from users nothing", async () => {
      const orders = await identity.asService("orders");
      const foreign = create(EventSchema, { ...orderPaid("acme"), type: "payment.succeeded" });
      const refused = await webhooks
        .recordEvents({ events: [orderPaid("acme"), foreign] }, orders)
        .catch((e: unknown) => e);
      expect(refused).to.be.instanceOf(ConnectError);
      expect(errorInfoOf(refused as ConnectError)?.reason).to.equal("INVALID_REQUEST");
      const malformed = create(EventSchema, { ...orderPaid("acme"), id: "evt_short" });
      expect(
        errorInfoOf(
          (await webhooks.recordEvents({ events: [malformed] }, orders).catch((e: unknown) => e)) as ConnectError,
        )?.reason,
      ).to.equal("INVALID_REQUEST");
      const alice = await identity.login("alice@acme.test");
      const asUser = await webhooks.recordEvents({ events: [orderPaid("acme")] }, alice).catch((e: unknown) => e);
      expect((asUser as ConnectError).code).to.be.oneOf([Code.PermissionDenied, Code.Unauthenticated]);
    });
  });
}
