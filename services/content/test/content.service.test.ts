// ContentService over real gRPC: entity tags under concurrency, the feed across replicas
// (LISTEN/NOTIFY on one database), watch cancellation, and the catalog import.
import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { identityConfigFrom, startIdentityService, type IdentityRuntime } from "@switchyard/identity";
import { contentConfigFrom, startContentService, type ContentRuntime } from "@switchyard/content";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import { createLogger } from "@switchyard/platform/logger.js";
import { createServiceClient, openChannel, type Client } from "@switchyard/platform/grpc";
import { serviceEngines } from "../../platform/test/support/in-process-mesh.js";

const logger = createLogger("test", "silent");

for (const engine of serviceEngines()) {
  describe(`content service over gRPC (${engine.name})`, function () {
    this.timeout(90_000);
    const suffix = randomBytes(4).toString("hex");
    const dataDir = mkdtempSync(join(tmpdir(), "switchyard-content-"));
    let identity: IdentityRuntime;
    const replicas: ContentRuntime[] = [];
    const channels: ReturnType<typeof openChannel>[] = [];
    let clients: Client<typeof ContentService>[] = [];
    let alice: { headers: { authorization: string } };
    let bob: { headers: { authorization: string } };
    let carol: { headers: { authorization: string } };

    // Services share this test's event loop: their event-loop shedding is off here (tested on its own).
    // The demo data is seeded into a test server's fresh schemas on purpose (DEMO_DATA_FORCE).
    const common = { DATA_DIR: dataDir, LOG_LEVEL: "silent", DATABASE_URL: engine.databaseUrl ?? "", SHED_EVENT_LOOP_DELAY_MS: "0", DEMO_DATA_FORCE: "true" };
    before(async () => {
      identity = await startIdentityService(identityConfigFrom({ ...common, IDENTITY_PORT: "0", IDENTITY_DEMO_DATA: "true", IDENTITY_DB_SCHEMA: `identity_${suffix}`, SIGNING_KEY_ENCRYPTION_KEY: randomBytes(32).toString("base64") }), logger);
      const identityAddress = `127.0.0.1:${identity.server.port}`;
      // Two replicas on one database when a server is there (embedded storage has one process).
      const count = engine.databaseUrl ? 2 : 1;
      for (let i = 0; i < count; i++) {
        replicas.push(await startContentService(contentConfigFrom({ ...common, CONTENT_PORT: "0", IDENTITY_ADDRESS: identityAddress, CONTENT_DB_SCHEMA: `content_${suffix}`, CONTENT_DEMO_DATA: "true", CATALOG_OWNER_TENANT: "acme" }), logger));
      }
      clients = replicas.map((r) => {
        const ch = openChannel(`127.0.0.1:${r.server.port}`);
        channels.push(ch);
        return createServiceClient(ContentService, ch);
      });
      const idChannel = openChannel(identityAddress);
      channels.push(idChannel);
      const id = createServiceClient(IdentityService, idChannel);
      const login = async (email: string, tenantId = "acme") => ({ headers: { authorization: `Bearer ${(await id.createSession({ tenantId, email, password: "demo-password" })).accessToken}` } });
      alice = await login("alice@acme.test");
      bob = await login("bob@acme.test");
      carol = await login("carol@globex.test", "globex");
    });
    after(async () => {
      for (const ch of channels) ch.close();
      for (const r of replicas) await r.stop();
      await identity?.stop();
      rmSync(dataDir, { recursive: true, force: true });
      if (engine.databaseUrl) {
        const client = new pg.Client(engine.databaseUrl);
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS identity_${suffix} CASCADE; DROP SCHEMA IF EXISTS content_${suffix} CASCADE`);
        await client.end();
      }
    });

    it("applies exactly one of 100 concurrent updates carrying the same entity tag, and stores the winner's", async () => {
      const { document } = await clients[0]!.createDocument({ title: "Race", body: "v0" }, alice);
      const attempts = await Promise.allSettled(
        Array.from({ length: 100 }, (_, i) => clients[i % clients.length]!.updateDocument({ documentId: document!.id, title: "Race", body: `writer ${i}`, ifMatch: document!.etag }, alice)),
      );
      const won = attempts.filter((a) => a.status === "fulfilled") as PromiseFulfilledResult<{ document?: { body: string; etag: string } }>[];
      expect(won).to.have.length(1);
      for (const a of attempts) if (a.status === "rejected") expect(errorInfoOf(a.reason as ConnectError)?.reason).to.equal("ETAG_MISMATCH");
      const stored = (await clients[0]!.getDocument({ documentId: document!.id }, alice)).document!;
      expect(stored.body).to.equal(won[0]!.value.document!.body);
      expect(stored.etag).to.equal(won[0]!.value.document!.etag).and.not.equal(document!.etag);
    });

    it("delivers a post made on any replica to a watcher on every replica, and a cancelled watch leaves no subscriber", async () => {
      const watchers = clients.map((client) => {
        const controller = new AbortController();
        const seen: string[] = [];
        const done = (async () => {
          try {
            for await (const m of client.watchPosts({}, { ...alice, signal: controller.signal })) if (m.post) seen.push(m.post.title);
          } catch (err) {
            return ConnectError.from(err).code;
          }
          return undefined;
        })();
        return { controller, seen, done };
      });
      await sleep(300);
      for (const [i, client] of clients.entries()) await client.createPost({ title: `from replica ${i}`, body: "x" }, alice);
      const expected = clients.map((_, i) => `from replica ${i}`);
      for (let i = 0; i < 100 && watchers.some((w) => w.seen.length < expected.length); i++) await sleep(30);
      for (const w of watchers) expect(w.seen).to.deep.equal(expected);
      for (const w of watchers) w.controller.abort();
      for (const w of watchers) expect(await w.done).to.equal(Code.Canceled);
      for (let i = 0; i < 50 && replicas.some((r) => r.feed.subscriberCount() > 0); i++) await sleep(20);
      expect(replicas.map((r) => r.feed.subscriberCount())).to.deep.equal(replicas.map(() => 0));
    });

    it("a burst of 40 concurrent posts (on every replica) reaches each watcher completely, once each, in feed order", async () => {
      const watchers = clients.map((client) => {
        const controller = new AbortController();
        const seen: { id: string; createdAt: bigint }[] = [];
        const done = (async () => {
          try {
            for await (const m of client.watchPosts({}, { ...alice, signal: controller.signal })) if (m.post) seen.push({ id: m.post.id, createdAt: m.post.createTime!.seconds * 1000n + BigInt(Math.floor(m.post.createTime!.nanos / 1e6)) });
          } catch {
            // cancelled
          }
        })();
        return { controller, seen, done };
      });
      await sleep(300);
      const made = await Promise.all(Array.from({ length: 40 }, (_, i) => clients[i % clients.length]!.createPost({ title: `burst ${i}`, body: "" }, alice)));
      const ids = new Set(made.map((m) => m.post!.id));
      for (let i = 0; i < 200 && watchers.some((w) => w.seen.length < ids.size); i++) await sleep(25);
      for (const w of watchers) w.controller.abort();
      await Promise.all(watchers.map((w) => w.done));
      for (const w of watchers) {
        expect([...w.seen.map((p) => p.id)].sort(), "every post of the burst, nothing else").to.deep.equal([...ids].sort());
        expect(w.seen, "each once").to.have.length(ids.size);
        // The order of the feed's keyset: a client resuming after any of them misses none of the rest.
        for (let i = 1; i < w.seen.length; i++) {
          const [a, b] = [w.seen[i - 1]!, w.seen[i]!];
          expect(a.createdAt < b.createdAt || (a.createdAt === b.createdAt && a.id < b.id), `${a.id} before ${b.id} in (created_at, id) order`).to.equal(true);
        }
      }
    });

    it("resumes a watch after a cursor with exactly the posts made since, then goes live", async () => {
      const first = (await clients[0]!.createPost({ title: "r0", body: "" }, alice)).post!;
      await clients[0]!.createPost({ title: "r1", body: "" }, alice);
      await clients[0]!.createPost({ title: "r2", body: "" }, alice);
      const controller = new AbortController();
      const seen: string[] = [];
      const watching = (async () => {
        try {
          for await (const m of clients[clients.length - 1]!.watchPosts({ afterCursor: first.cursor }, { ...alice, signal: controller.signal })) {
            if (m.post) seen.push(m.post.title);
            if (seen.length === 2) await clients[0]!.createPost({ title: "r3", body: "" }, alice);
            if (seen.length === 3) controller.abort();
          }
        } catch {
          // cancelled
        }
      })();
      await watching;
      expect(seen).to.deep.equal(["r1", "r2", "r3"]);
    });

    it("imports catalog items from a stream and answers one summary; only the catalog owner tenant's admins may", async () => {
      async function* items() {
        yield { item: { sku: `NEW-${suffix}`, name: "New", price: 100n, currency: "EUR" } };
        yield { item: { sku: "BOOK-1", name: "The Pragmatic Switchyard", price: 1700n, currency: "EUR" } };
        yield { item: { sku: "BAD", name: "Bad", price: -1n, currency: "EUR" } };
        yield { item: { sku: "no spaces allowed", name: "x", price: 1n, currency: "EUR" } };
      }
      const summary = await clients[0]!.importItems(items(), alice);
      expect(summary.created).to.equal(1);
      expect(summary.updated).to.equal(1);
      expect(summary.rejected.map((r) => [r.index, r.sku])).to.deep.equal([[2, "BAD"], [3, "no spaces allowed"]]);
      const page = await clients[0]!.listCatalogItems({ page: 1, pageSize: 100 });
      expect(page.items.find((i) => i.sku === "BOOK-1")?.price).to.equal(1700n);
      expect(Number(page.total)).to.equal(6);
      const member = (await clients[0]!.importItems(items(), bob).catch((e: unknown) => e)) as ConnectError;
      expect([member.code, errorInfoOf(member)?.reason]).to.deep.equal([Code.PermissionDenied, "ROLE_REQUIRED"]);
      // The catalog is global: another tenant's admin may not rewrite it.
      const otherTenant = (await clients[0]!.importItems(items(), carol).catch((e: unknown) => e)) as ConnectError;
      expect([otherTenant.code, errorInfoOf(otherTenant)?.reason]).to.deep.equal([Code.PermissionDenied, "TENANT_MISMATCH"]);
      expect((await clients[0]!.listCatalogItems({ page: 1, pageSize: 100 })).items.find((i) => i.sku === "BOOK-1")?.price, "refused imports changed nothing").to.equal(1700n);
    });

    it("reads catalog items by sku without a token: those found, in the order asked, each once", async () => {
      const { items } = await clients[0]!.batchGetCatalogItems({ skus: ["MUG-1", "NOPE", "PEN-1", "MUG-1"] });
      expect(items.map((i) => [i.sku, i.price, i.currency])).to.deep.equal([["MUG-1", 900n, "EUR"], ["PEN-1", 2500n, "EUR"]]);
      expect((await clients[0]!.batchGetCatalogItems({ skus: [] })).items).to.deep.equal([]);
      const tooMany = (await clients[0]!.batchGetCatalogItems({ skus: Array.from({ length: 101 }, (_, i) => `S${i}`) }).catch((e: unknown) => e)) as ConnectError;
      expect(errorInfoOf(tooMany)?.reason).to.equal("INVALID_REQUEST");
      const malformed = (await clients[0]!.batchGetCatalogItems({ skus: ["no spaces"] }).catch((e: unknown) => e)) as ConnectError;
      expect(errorInfoOf(malformed)?.reason).to.equal("INVALID_REQUEST");
    });

    it("takes ImportItems from a client other than the serving library (connect's gRPC transport)", async () => {
      const connect = createClient(ContentService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${replicas[0]!.server.port}` }));
      async function* items() {
        yield { item: { sku: `VIA-CONNECT-${suffix}`, name: "Via connect", price: 42n, currency: "EUR" } };
        yield { item: { sku: `VIA-CONNECT-${suffix}`, name: "Via connect, again", price: 43n, currency: "EUR" } };
      }
      const summary = await connect.importItems(items(), { headers: alice.headers });
      expect([summary.created, summary.updated, summary.rejected.length]).to.deep.equal([1, 1, 0]);
    });
  });
}
