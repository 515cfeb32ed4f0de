// WebhookService over real gRPC, with identity issuing the tokens: a tenant's admins manage its
// endpoints (a member is refused, another tenant's are not found), the secret is in the creation's
// answer (and its replay) and the rotation's only, and no destination inside the network is taken
// — written as an address, or behind a name — unless the operator allows it.
import { expect } from "chai";
import { randomUUID } from "node:crypto";
import { toJsonString } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  GetEndpointResponseSchema,
  ListEndpointsResponseSchema,
  WebhookService,
} from "@switchyard/gen/switchyard/webhooks/v1/webhooks_pb.js";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import { serviceEngines } from "../../platform/test/support/in-process-mesh.js";
import type { Client } from "@switchyard/platform/grpc";
import { startTestWebhooks, type TestWebhooks } from "./support/test-webhooks.js";

/** Names this test's resolver knows; any other does not resolve. */
const NAMES: Record<string, string[]> = {
  "partner.example": ["93.184.216.34"],
  "rebinding.example": ["93.184.216.34", "10.0.0.1"],
  "inward.example": ["10.0.0.1"],
  "metadata.example": ["169.254.169.254"],
  "v6-loopback.example": ["::1"],
  "v6-metadata.example": ["fd00:ec2::254"],
};
const resolve = async (hostname: string) => NAMES[hostname] ?? [];

async function failure(
  promise: Promise<unknown>,
): Promise<{ code: Code; reason: string | undefined; message: string }> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, "the call should have failed").to.be.instanceOf(ConnectError);
  const e = err as ConnectError;
  return { code: e.code, reason: errorInfoOf(e)?.reason, message: e.rawMessage };
}

for (const engine of serviceEngines()) {
  describe(`webhooks service over gRPC (${engine.name})`, function () {
    this.timeout(60_000);
    let started: TestWebhooks;
    let webhooks: Client<typeof WebhookService>;
    let alice: { headers: { authorization: string } };
    let bob: { headers: { authorization: string } };
    let carol: { headers: { authorization: string } };

    before(async () => {
      started = await startTestWebhooks({ databaseUrl: engine.databaseUrl, resolve });
      webhooks = started.webhooks;
      alice = await started.identity.login("alice@acme.test");
      bob = await started.identity.login("bob@acme.test");
      carol = await started.identity.login("carol@globex.test");
    });
    after(async () => started?.stop());

    const create = (url: string, opts = alice, idempotencyKey: string = randomUUID()) =>
      webhooks.createEndpoint({ idempotencyKey, url, eventTypes: ["payment.succeeded", "order.paid"] }, opts);

    it("lets an admin create an endpoint: the secret in that answer and its replay only, never in a read or list", async () => {
      const key = randomUUID();
      const made = await create("https://partner.example/hooks", alice, key);
      expect(made.secret).to.match(/^whsec_[A-Za-z0-9+/]{43}=$/);
      expect(made.replayed).to.equal(false);
      expect(made.endpoint!.id).to.match(/^we_/);
      expect([made.endpoint!.url, made.endpoint!.eventTypes, made.endpoint!.enabled]).to.deep.equal([
        "https://partner.example/hooks",
        ["payment.succeeded", "order.paid"],
        true,
      ]);
      const again = await create("https://partner.example/hooks", alice, key);
      expect([again.replayed, again.secret, again.endpoint!.id]).to.deep.equal([true, made.secret, made.endpoint!.id]);
      const read = await webhooks.getEndpoint({ endpointId: made.endpoint!.id }, alice);
      const listed = await webhooks.listEndpoints({ pageSize: 100 }, alice);
      const answered =
        toJsonString(GetEndpointResponseSchema, read) + toJsonString(ListEndpointsResponseSchema, listed);
      expect(answered).to.contain(made.endpoint!.id).and.not.to.contain(made.secret.slice(6, 20));
      expect(listed.endpoints.map((e) => e.id)).to.include(made.endpoint!.id);
      expect((await failure(create("https://partner.example/other", alice, key))).reason).to.equal(
        "IDEMPOTENCY_KEY_REUSED",
      );
      expect((await failure(create("https://partner.example/hooks", alice, "not-a-uuid"))).reason).to.equal(
        "IDEMPOTENCY_KEY_INVALID",
      );
    });

    it("refuses a member (403) and hides one tenant's endpoints from another (404)", async () => {
      const made = await create("https://partner.example/a");
      const id = made.endpoint!.id;
      for (const call of [
        () => create("https://partner.example/b", bob),
        () => webhooks.getEndpoint({ endpointId: id }, bob),
        () => webhooks.listEndpoints({}, bob),
        () => webhooks.updateEndpoint({ endpointId: id, enabled: false }, bob),
        () => webhooks.rotateEndpointSecret({ endpointId: id }, bob),
        () => webhooks.deleteEndpoint({ endpointId: id }, bob),
      ])
        expect(await failure(call())).to.include({ code: Code.PermissionDenied, reason: "ROLE_REQUIRED" });
      for (const call of [
        () => webhooks.getEndpoint({ endpointId: id }, carol),
        () => webhooks.updateEndpoint({ endpointId: id, enabled: false }, carol),
        () => webhooks.rotateEndpointSecret({ endpointId: id }, carol),
        () => webhooks.deleteEndpoint({ endpointId: id }, carol),
        () => webhooks.getEndpoint({ endpointId: "we_nonsense" }, alice),
      ])
        expect(await failure(call())).to.include({ code: Code.NotFound, reason: "NOT_FOUND" });
      expect((await webhooks.listEndpoints({ pageSize: 100 }, carol)).endpoints.map((e) => e.id)).not.to.include(id);
      expect((await webhooks.getEndpoint({ endpointId: id }, alice)).endpoint!.enabled, "unchanged").to.equal(true);
      expect((await failure(webhooks.listEndpoints({}))).code, "no token").to.equal(Code.Unauthenticated);
    });

    it("refuses destinations inside the network: an inward address, plain http, a name resolving inward, one that does not resolve", async () => {
      const refused = [
        "http://partner.example/hooks",
        "https://127.0.0.1/",
        "https://169.254.169.254/latest/meta-data/",
        "https://[::1]:8443/",
        "https://[::1]/",
        "https://v6-loopback.example/",
        "https://v6-metadata.example/",
        "https://inward.example/",
        "https://rebinding.example/",
        "https://metadata.example/",
        "https://unknown.example/",
      ];
      for (const url of refused) {
        const answer = await failure(create(url));
        expect(answer, url).to.include({ code: Code.InvalidArgument, reason: "RULE_VIOLATION" });
      }
      expect((await failure(create("https://inward.example/"))).message).to.match(/resolves to a private address/);
      expect((await failure(create("https://v6-loopback.example/"))).message).to.match(
        /resolves to a loopback address/,
      );
      const made = await create("https://partner.example/ok");
      expect(
        await failure(webhooks.updateEndpoint({ endpointId: made.endpoint!.id, url: "https://10.0.0.8/" }, alice)),
      ).to.include({ reason: "RULE_VIOLATION" });
    });

    it("changes, rotates and deletes: a rotation answers a new secret and when the one before stops signing", async () => {
      const made = await create("https://partner.example/c");
      const id = made.endpoint!.id;
      const changed = await webhooks.updateEndpoint(
        { endpointId: id, url: "https://partner.example/d", eventTypes: { values: ["order.shipped"] }, enabled: false },
        alice,
      );
      expect([changed.endpoint!.url, changed.endpoint!.eventTypes, changed.endpoint!.enabled]).to.deep.equal([
        "https://partner.example/d",
        ["order.shipped"],
        false,
      ]);
      expect(
        (await failure(webhooks.updateEndpoint({ endpointId: id, eventTypes: { values: [] } }, alice))).reason,
      ).to.equal("RULE_VIOLATION");
      const rotated = await webhooks.rotateEndpointSecret({ endpointId: id }, alice);
      expect(rotated.secret)
        .to.match(/^whsec_/)
        .and.not.equal(made.secret);
      const expires = Number(rotated.endpoint!.previousSecretExpireTime!.seconds) * 1000;
      expect(expires - Date.now()).to.be.within(23.9 * 3_600_000, 24 * 3_600_000);
      await webhooks.deleteEndpoint({ endpointId: id }, alice);
      expect((await failure(webhooks.getEndpoint({ endpointId: id }, alice))).code).to.equal(Code.NotFound);
      expect((await failure(webhooks.deleteEndpoint({ endpointId: id }, alice))).code).to.equal(Code.NotFound);
    });

    it("pages the tenant's endpoints with a cursor that no other list takes", async () => {
      for (let i = 0; i < 3; i++) await create(`https://partner.example/page-${i}`);
      const seen: string[] = [];
      let pageToken = "";
      do {
        const page = await webhooks.listEndpoints({ pageSize: 2, pageToken }, alice);
        seen.push(...page.endpoints.map((e) => e.id));
        pageToken = page.nextPageToken;
      } while (pageToken !== "");
      expect(new Set(seen).size).to.equal(seen.length);
      expect(seen.length).to.be.at.least(3);
      const first = await webhooks.listEndpoints({ pageSize: 1 }, alice);
      expect((await failure(webhooks.listEndpoints({ pageToken: first.nextPageToken }, carol))).code).to.equal(
        Code.InvalidArgument,
      );
    });
  });
}
