// The edge caches' side of content over real gRPC: the change log streamed in commit order to a cache
// connected to any replica, leases renewed on any replica, and the bounded wait — a write of cached
// data answers only once every cache holding a lease has applied it, or that lease has ended.
import { expect } from "chai";
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  CacheChangeKind,
  ContentService,
  ImportJobStatus,
  type WatchCacheChangesResponse,
} from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { identityConfigFrom, startIdentityService, type IdentityRuntime } from "@switchyard/identity";
import { contentConfigFrom, startContentService, type ContentRuntime } from "@switchyard/content";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import { createLogger } from "@switchyard/platform/logger.js";
import { createServiceClient, openChannel, type Client } from "@switchyard/platform/grpc";
import { serviceCredentialsFromIdentity } from "@switchyard/platform/service-credentials.js";
import { SERVICE_AUTHORIZATION } from "@switchyard/platform/caller.js";
import { serviceEngines } from "../../platform/test/support/in-process-mesh.js";

const logger = createLogger("test", "silent");
const LEASE_MS = 1_500;

/** A change stream read as it arrives. */
class Watch {
  readonly messages: WatchCacheChangesResponse[] = [];
  private readonly abort = new AbortController();
  readonly done: Promise<unknown>;
  constructor(client: Client<typeof ContentService>, headers: Record<string, string>) {
    this.done = (async () => {
      for await (const m of client.watchCacheChanges({}, { headers, signal: this.abort.signal })) this.messages.push(m);
    })().catch((err: unknown) => err);
  }
  get position(): bigint {
    return this.messages.at(-1)?.position ?? -1n;
  }
  changes() {
    return this.messages.flatMap((m) => m.changes);
  }
  async until(predicate: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (!predicate()) {
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
      await sleep(10);
    }
  }
  close(): void {
    this.abort.abort();
  }
}

for (const engine of serviceEngines()) {
  describe(`content: cache change log and leases (${engine.name})`, function () {
    this.timeout(60_000);
    const suffix = randomBytes(4).toString("hex");
    const dataDir = mkdtempSync(join(tmpdir(), "switchyard-cache-log-"));
    const gatewaySecret = randomBytes(32).toString("base64url");
    const ordersSecret = randomBytes(32).toString("base64url");
    let identity: IdentityRuntime;
    const replicas: ContentRuntime[] = [];
    const channels: ReturnType<typeof openChannel>[] = [];
    let clients: Client<typeof ContentService>[] = [];
    let alice: { headers: { authorization: string } };
    let asGateway: { headers: Record<string, string> };
    let asOrders: { headers: Record<string, string> };
    const watches: Watch[] = [];
    const common = {
      DATA_DIR: dataDir,
      LOG_LEVEL: "silent",
      DATABASE_URL: engine.databaseUrl ?? "",
      SHED_EVENT_LOOP_DELAY_MS: "0",
      DEMO_DATA_FORCE: "true",
    };

    before(async () => {
      identity = await startIdentityService(
        identityConfigFrom({
          ...common,
          IDENTITY_PORT: "0",
          IDENTITY_DEMO_DATA: "true",
          IDENTITY_DB_SCHEMA: `identity_${suffix}`,
          SIGNING_KEY_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
          IDENTITY_SERVICE_CREDENTIALS: `gateway:${gatewaySecret},orders:${ordersSecret}`,
        }),
        logger,
      );
      const identityAddress = `127.0.0.1:${identity.server.port}`;
      const env = {
        ...common,
        CONTENT_PORT: "0",
        IDENTITY_ADDRESS: identityAddress,
        CONTENT_DB_SCHEMA: `content_${suffix}`,
        CONTENT_DEMO_DATA: "true",
        CATALOG_OWNER_TENANT: "acme",
        CONTENT_CACHE_LEASE_MS: String(LEASE_MS),
      };
      // Two replicas on one database when a server is there: the stream, the renewals and the writes each on another.
      for (let i = 0; i < (engine.databaseUrl ? 2 : 1); i++)
        replicas.push(await startContentService(contentConfigFrom(env), logger, { importJobs: { pollMs: 200 } }));
      clients = replicas.map((r) => {
        const ch = openChannel(`127.0.0.1:${r.server.port}`);
        channels.push(ch);
        return createServiceClient(ContentService, ch);
      });
      const idChannel = openChannel(identityAddress);
      channels.push(idChannel);
      const id = createServiceClient(IdentityService, idChannel);
      alice = {
        headers: {
          authorization: `Bearer ${(await id.createSession({ tenantId: "acme", email: "alice@acme.test", password: "demo-password" })).accessToken}`,
        },
      };
      asGateway = {
        headers: {
          [SERVICE_AUTHORIZATION]: `Bearer ${await serviceCredentialsFromIdentity(idChannel, "gateway", gatewaySecret).token()}`,
        },
      };
      asOrders = {
        headers: {
          [SERVICE_AUTHORIZATION]: `Bearer ${await serviceCredentialsFromIdentity(idChannel, "orders", ordersSecret).token()}`,
        },
      };
    });
    after(async () => {
      for (const w of watches) w.close();
      for (const ch of channels) ch.close();
      for (const r of replicas) await r.stop();
      await identity?.stop();
      rmSync(dataDir, { recursive: true, force: true });
      if (engine.databaseUrl) {
        const client = new pg.Client(engine.databaseUrl);
        await client.connect();
        await client.query(
          `DROP SCHEMA IF EXISTS identity_${suffix} CASCADE; DROP SCHEMA IF EXISTS content_${suffix} CASCADE`,
        );
        await client.end();
      }
    });

    /** The stream on the last replica, the writes on the first (the same one on embedded storage). */
    const writer = () => clients[0]!;
    const watcher = () => clients[clients.length - 1]!;
    async function watch(): Promise<Watch> {
      const w = new Watch(watcher(), asGateway.headers);
      watches.push(w);
      await w.until(() => w.messages.length > 0, "the first message");
      expect(w.messages[0]!.subscribed).to.equal(true);
      return w;
    }
    /** A new subscriber holding a lease, caught up to now — the only one: earlier tests' leases have ended. */
    async function leaseHolder(w: Watch): Promise<{ subscriberId: string; renewedAt: number }> {
      await sleep(LEASE_MS + 100);
      const subscriberId = randomUUID();
      const renewedAt = performance.now();
      const granted = await writer().renewCacheLease({ subscriberId, appliedPosition: w.position }, asGateway);
      expect(granted.leaseMs).to.equal(LEASE_MS);
      expect(granted.requiredPosition).to.equal(w.position);
      return { subscriberId, renewedAt };
    }

    it("streams each change of a document and of the catalog after the starting position, in commit order, with heartbeats", async () => {
      const w = await watch();
      const start = w.messages[0]!.position;
      const doc = (await writer().createDocument({ title: "t", body: "b" }, alice)).document!;
      await writer().updateDocument({ documentId: doc.id, title: "t2", body: "b2", ifMatch: "" }, alice);
      async function* items() {
        yield { item: { sku: `CACHE-${suffix}`, name: "n", price: 100n, currency: "EUR" } };
      }
      await writer().importItems(items(), alice);
      await w.until(() => w.changes().length >= 2, "two changes");
      const changes = w.changes();
      expect(changes.map((c) => [c.kind, c.tenantId, c.id])).to.deep.equal([
        [CacheChangeKind.DOCUMENT, "acme", doc.id],
        [CacheChangeKind.CATALOG, "", ""],
      ]);
      expect(changes[0]!.position > start).to.equal(true);
      expect(changes[1]!.position > changes[0]!.position).to.equal(true);
      // A heartbeat: no changes, the position held.
      const before = w.messages.length;
      await w.until(() => w.messages.length > before, "a heartbeat", 3_000);
      expect(w.messages.at(-1)!.changes).to.have.length(0);
      expect(w.messages.at(-1)!.position).to.equal(changes[1]!.position);
    });

    it("gives the stream and leases to the gateway's own token only", async () => {
      for (const who of [alice, asOrders]) {
        const err = await (async () => {
          for await (const _ of watcher().watchCacheChanges({}, who)) return undefined;
        })().catch((e: unknown) => e);
        expect(err, "stream").to.be.instanceOf(ConnectError);
        expect([Code.PermissionDenied, Code.Unauthenticated]).to.include((err as ConnectError).code);
        const renewal = await writer()
          .renewCacheLease({ subscriberId: randomUUID(), appliedPosition: 0n }, who)
          .catch((e: unknown) => e);
        expect([Code.PermissionDenied, Code.Unauthenticated]).to.include((renewal as ConnectError).code);
      }
      const orders = await writer()
        .renewCacheLease({ subscriberId: randomUUID(), appliedPosition: 0n }, asOrders)
        .catch((e: unknown) => e);
      expect(errorInfoOf(orders as ConnectError)?.reason).to.equal("ROLE_REQUIRED");
    });

    it("answers a renewal with the last change committed: a cache behind it must catch up before serving", async () => {
      const w = await watch();
      const doc = (await writer().createDocument({ title: "t", body: "b" }, alice)).document!;
      await writer().updateDocument({ documentId: doc.id, title: "t2", body: "b2", ifMatch: "" }, alice);
      await w.until(() => w.changes().length >= 1, "the change");
      const granted = await writer().renewCacheLease({ subscriberId: randomUUID(), appliedPosition: 0n }, asGateway);
      expect(granted.requiredPosition).to.equal(w.changes()[0]!.position);
    });

    it("answers a write only once a cache holding a lease applied it", async () => {
      const w = await watch();
      const doc = (await writer().createDocument({ title: "t", body: "b" }, alice)).document!;
      const { subscriberId } = await leaseHolder(w);
      let answered = false;
      const update = writer()
        .updateDocument({ documentId: doc.id, title: "t2", body: "b2", ifMatch: "" }, alice)
        .then((r) => ((answered = true), r));
      // Keep the lease running, without applying the write: the write waits.
      await w.until(() => w.changes().length >= 1, "the change");
      await writer().renewCacheLease({ subscriberId, appliedPosition: w.changes()[0]!.position - 1n }, asGateway);
      await sleep(400);
      expect(answered, "answered before the cache applied the write").to.equal(false);
      const acked = performance.now();
      await watcher().renewCacheLease({ subscriberId, appliedPosition: w.changes()[0]!.position }, asGateway);
      await update;
      expect(performance.now() - acked, "ms from the acknowledgement to the answer").to.be.below(400);
    });

    it("holds a write for a cache that stopped acknowledging until its lease ends, no longer", async () => {
      const w = await watch();
      const doc = (await writer().createDocument({ title: "t", body: "b" }, alice)).document!;
      const { renewedAt } = await leaseHolder(w);
      const started = performance.now();
      await writer().updateDocument({ documentId: doc.id, title: "t2", body: "b2", ifMatch: "" }, alice);
      const answeredAt = performance.now();
      expect(answeredAt - renewedAt, "the write answered while the lease still ran").to.be.at.least(LEASE_MS - 50);
      expect(answeredAt - started, "the wait is bounded by the lease").to.be.below(LEASE_MS + 700);
      // Its lease over, the cache is waited for no more.
      const again = performance.now();
      await writer().updateDocument({ documentId: doc.id, title: "t3", body: "b3", ifMatch: "" }, alice);
      expect(performance.now() - again).to.be.below(500);
    });

    it("waits no more for a cache that gave its lease up", async () => {
      const w = await watch();
      const doc = (await writer().createDocument({ title: "t", body: "b" }, alice)).document!;
      const { subscriberId } = await leaseHolder(w);
      const started = performance.now();
      const update = writer().updateDocument({ documentId: doc.id, title: "t2", body: "b2", ifMatch: "" }, alice);
      await sleep(200);
      const released = await watcher().renewCacheLease({ subscriberId, appliedPosition: 0n, release: true }, asGateway);
      expect(released.leaseMs, "a release grants nothing").to.equal(0);
      await update;
      expect(performance.now() - started, "answered on the release, not at the lease's end").to.be.below(
        LEASE_MS - 300,
      );
    });

    it("extends no more the lease of a cache that keeps renewing without applying a change: a write waits about two leases at most", async () => {
      const w = await watch();
      const doc = (await writer().createDocument({ title: "t", body: "b" }, alice)).document!;
      const { subscriberId } = await leaseHolder(w);
      const behind = w.position;
      const started = performance.now();
      let answered = false;
      const update = writer()
        .updateDocument({ documentId: doc.id, title: "t2", body: "b2", ifMatch: "" }, alice)
        .then(() => (answered = true));
      const leases: number[] = [];
      while (!answered && performance.now() - started < 4 * LEASE_MS) {
        leases.push((await watcher().renewCacheLease({ subscriberId, appliedPosition: behind }, asGateway)).leaseMs);
        await sleep(LEASE_MS / 5);
      }
      await update;
      expect(leases[0], "extended while the change is young").to.equal(LEASE_MS);
      expect(leases, "not extended once the change waited a whole lease").to.include(0);
      expect(performance.now() - started).to.be.below(2 * LEASE_MS + 700);
    });

    it("marks an import job succeeded only once the caches holding a lease applied its items", async () => {
      const w = await watch();
      const { subscriberId } = await leaseHolder(w);
      const job = (
        await writer().createImportJob(
          {
            idempotencyKey: randomUUID(),
            lines: [{ line: 1, item: { sku: `JOB-${suffix}`, name: "n", price: 1n, currency: "EUR" } }],
          },
          alice,
        )
      ).job!;
      await w.until(() => w.changes().some((c) => c.kind === CacheChangeKind.CATALOG), "the job's change");
      // Its lines ran; the cache has not acknowledged them (its lease runs on): the job is not done.
      await sleep(400);
      expect((await writer().getImportJob({ jobId: job.id }, alice)).job!.status).to.equal(ImportJobStatus.RUNNING);
      await writer().renewCacheLease({ subscriberId, appliedPosition: w.position }, asGateway);
      const until = Date.now() + 3_000;
      let status = ImportJobStatus.RUNNING;
      while (status !== ImportJobStatus.SUCCEEDED && Date.now() < until) {
        await sleep(20);
        status = (await writer().getImportJob({ jobId: job.id }, alice)).job!.status;
      }
      expect(status).to.equal(ImportJobStatus.SUCCEEDED);
    });
  });
}
