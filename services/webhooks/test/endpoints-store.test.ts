// Endpoints on every store adapter: secrets sealed at rest — in the endpoint's row and in the stored
// answer of its creation — and opened only with the key; rotation keeps the secret before signing
// for its time; tenants never meet.
import { expect } from "chai";
import { randomBytes, randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { SqlDatabase } from "@switchyard/platform/store";
import { forEachDatabase } from "../../platform/test/support/databases.js";
import { newEndpointSecret, SecretBox } from "../src/endpoint-secrets.js";
import { webhooksMigrations } from "../src/store/migrations.js";
import { SqlWebhooksStore } from "../src/store/sql-store.js";

forEachDatabase("webhook endpoints store", (dbs) => {
  let db: SqlDatabase;
  let store: SqlWebhooksStore;
  const key = randomBytes(32);
  before(async () => {
    db = await dbs.open(webhooksMigrations);
    store = new SqlWebhooksStore(db, new SecretBox(key));
  });

  const keyed = () => ({ principal: "user:1", key: randomUUID(), requestHash: "h" });
  const create = (tenant: string, secret = newEndpointSecret(), idempotency = keyed()) =>
    store.createEndpoint(tenant, idempotency, {
      url: "https://example.com/hook",
      eventTypes: ["payment.succeeded"],
      secret,
    });

  it("keeps the secret sealed at rest, in the endpoint and in its creation's stored answer; a replay gives it back", async () => {
    const secret = newEndpointSecret();
    const idempotency = keyed();
    const { result } = await create("acme", secret, idempotency);
    expect(result.secret).to.equal(secret);
    const { rows } = await db.query<{ secret: string }>(`SELECT secret FROM endpoints WHERE id = $1`, [
      result.endpoint.id,
    ]);
    expect(rows[0]!.secret).to.match(/^aes256gcm:v1:/);
    const answers = await db.query<{ response: Uint8Array }>(`SELECT response FROM idempotency_keys WHERE key = $1`, [
      idempotency.key,
    ]);
    const stored = Buffer.from(answers.rows[0]!.response).toString("utf8");
    expect(stored).to.match(/^aes256gcm:v1:/);
    expect(stored).not.to.contain(secret.slice(6));
    const replay = await create("acme", newEndpointSecret(), idempotency);
    expect([replay.replayed, replay.result.secret, replay.result.endpoint.id]).to.deep.equal([
      true,
      secret,
      result.endpoint.id,
    ]);
    expect(await store.signingSecrets("acme", result.endpoint.id)).to.deep.equal({
      current: secret,
      previous: undefined,
    });
    const keyless = new SqlWebhooksStore(db, new SecretBox(undefined));
    expect(await keyless.signingSecrets("acme", result.endpoint.id).catch((e: unknown) => String(e))).to.match(
      /WEBHOOK_SECRET_ENCRYPTION_KEY is not set/,
    );
    const otherKey = new SqlWebhooksStore(db, new SecretBox(randomBytes(32)));
    expect(await otherKey.signingSecrets("acme", result.endpoint.id).catch((e: unknown) => String(e))).to.match(
      /sealed under another key/,
    );
  });

  it("rotates: the new secret is current, the one before signs beside it until it expires", async () => {
    const first = newEndpointSecret();
    const { result } = await create("acme", first);
    const second = newEndpointSecret();
    const rotated = (await store.rotateSecret("acme", result.endpoint.id, second, 60_000))!;
    expect(rotated.previousSecretExpiresAt!.getTime()).to.be.greaterThan(Date.now() + 50_000);
    expect(await store.signingSecrets("acme", result.endpoint.id)).to.deep.equal({ current: second, previous: first });
    const third = newEndpointSecret();
    await store.rotateSecret("acme", result.endpoint.id, third, 50);
    expect(await store.signingSecrets("acme", result.endpoint.id), "the oldest stops at once").to.deep.equal({
      current: third,
      previous: second,
    });
    await sleep(100);
    expect(await store.signingSecrets("acme", result.endpoint.id)).to.deep.equal({
      current: third,
      previous: undefined,
    });
    expect((await store.getEndpoint("acme", result.endpoint.id))!.previousSecretExpiresAt).to.equal(undefined);
  });

  it("changes, lists newest first and deletes within the tenant only", async () => {
    const tenant = `t-${randomBytes(4).toString("hex")}`;
    const made = [];
    for (let i = 0; i < 3; i++) {
      made.push((await create(tenant)).result.endpoint);
      await sleep(3); // each its own millisecond: the order is by time alone
    }
    const other = (await create("globex")).result.endpoint;
    expect((await store.listEndpoints(tenant, undefined, 10)).map((e) => e.id)).to.deep.equal(
      made.map((e) => e.id).reverse(),
    );
    expect(await store.getEndpoint(tenant, other.id)).to.equal(undefined);
    expect(await store.updateEndpoint(tenant, other.id, { enabled: false })).to.equal(undefined);
    expect(await store.deleteEndpoint(tenant, other.id)).to.equal(false);
    const changed = (await store.updateEndpoint(tenant, made[0]!.id, {
      enabled: false,
      eventTypes: ["order.paid", "order.shipped"],
    }))!;
    expect([changed.enabled, changed.eventTypes, changed.url]).to.deep.equal([
      false,
      ["order.paid", "order.shipped"],
      "https://example.com/hook",
    ]);
    expect(changed.updatedAt.getTime()).to.be.at.least(made[0]!.updatedAt.getTime());
    expect(await store.deleteEndpoint(tenant, made[0]!.id)).to.equal(true);
    expect(await store.getEndpoint(tenant, made[0]!.id)).to.equal(undefined);
    expect(await store.getEndpoint("globex", other.id)).to.not.equal(undefined);
  });
});
