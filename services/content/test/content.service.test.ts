// ContentService over real gRPC: entity tags under concurrency, the feed across replicas
// (LISTEN/NOTIFY on one database), watch cancellation, the catalog import, and import jobs (queued,
// run in the background through ImportItems, idempotent, taken up again after a crash).
import { expect } from "chai";
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { create, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  ContentService,
  ImportItemsRequestSchema,
  ImportJobStatus,
  ImportLineSchema,
  type ImportJob,
} from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { identityConfigFrom, startIdentityService, type IdentityRuntime } from "@switchyard/identity";
import { contentConfigFrom, startContentService, type ContentRuntime } from "@switchyard/content";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import { createLogger } from "@switchyard/platform/logger.js";
import { createServiceClient, openChannel, type Client } from "@switchyard/platform/grpc";
import { openSqlDatabase, type SqlDatabase } from "@switchyard/platform/store";
import { serviceEngines } from "../../platform/test/support/in-process-mesh.js";
import { contentMigrations } from "../src/store/migrations.js";

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
    let identityAddress: string;
    const schema = `content_${suffix}`;
    const contentEnv = () => ({
      ...common,
      CONTENT_PORT: "0",
      IDENTITY_ADDRESS: identityAddress,
      CONTENT_DB_SCHEMA: schema,
      CONTENT_DEMO_DATA: "true",
      CATALOG_OWNER_TENANT: "acme",
    });
    // Idle runners look for jobs every 200 ms here (an interrupted job on the server is found by polling).
    const startReplica = () =>
      startContentService(contentConfigFrom(contentEnv()), logger, { importJobs: { pollMs: 200 } });

    // Services share this test's event loop: their event-loop shedding is off here (tested on its own).
    // The demo data is seeded into a test server's fresh schemas on purpose (DEMO_DATA_FORCE).
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
        }),
        logger,
      );
      identityAddress = `127.0.0.1:${identity.server.port}`;
      // Two replicas on one database when a server is there (embedded storage has one process).
      const count = engine.databaseUrl ? 2 : 1;
      for (let i = 0; i < count; i++) replicas.push(await startReplica());
      clients = replicas.map((r) => {
        const ch = openChannel(`127.0.0.1:${r.server.port}`);
        channels.push(ch);
        return createServiceClient(ContentService, ch);
      });
      const idChannel = openChannel(identityAddress);
      channels.push(idChannel);
      const id = createServiceClient(IdentityService, idChannel);
      const login = async (email: string, tenantId = "acme") => ({
        headers: {
          authorization: `Bearer ${(await id.createSession({ tenantId, email, password: "demo-password" })).accessToken}`,
        },
      });
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
        await client.query(
          `DROP SCHEMA IF EXISTS identity_${suffix} CASCADE; DROP SCHEMA IF EXISTS content_${suffix} CASCADE`,
        );
        await client.end();
      }
    });

    it("applies exactly one of 100 concurrent updates carrying the same entity tag, and stores the winner's", async () => {
      const { document } = await clients[0]!.createDocument({ title: "Race", body: "v0" }, alice);
      const attempts = await Promise.allSettled(
        Array.from({ length: 100 }, (_, i) =>
          clients[i % clients.length]!.updateDocument(
            { documentId: document!.id, title: "Race", body: `writer ${i}`, ifMatch: document!.etag },
            alice,
          ),
        ),
      );
      const won = attempts.filter((a) => a.status === "fulfilled") as PromiseFulfilledResult<{
        document?: { body: string; etag: string };
      }>[];
      expect(won).to.have.length(1);
      for (const a of attempts)
        if (a.status === "rejected") expect(errorInfoOf(a.reason as ConnectError)?.reason).to.equal("ETAG_MISMATCH");
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
            for await (const m of client.watchPosts({}, { ...alice, signal: controller.signal }))
              if (m.post) seen.push(m.post.title);
          } catch (err) {
            return ConnectError.from(err).code;
          }
          return undefined;
        })();
        return { controller, seen, done };
      });
      await sleep(300);
      for (const [i, client] of clients.entries())
        await client.createPost({ title: `from replica ${i}`, body: "x" }, alice);
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
            for await (const m of client.watchPosts({}, { ...alice, signal: controller.signal }))
              if (m.post)
                seen.push({
                  id: m.post.id,
                  createdAt: m.post.createTime!.seconds * 1000n + BigInt(Math.floor(m.post.createTime!.nanos / 1e6)),
                });
          } catch {
            // cancelled
          }
        })();
        return { controller, seen, done };
      });
      await sleep(300);
      const made = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          clients[i % clients.length]!.createPost({ title: `burst ${i}`, body: "" }, alice),
        ),
      );
      const ids = new Set(made.map((m) => m.post!.id));
      for (let i = 0; i < 200 && watchers.some((w) => w.seen.length < ids.size); i++) await sleep(25);
      for (const w of watchers) w.controller.abort();
      await Promise.all(watchers.map((w) => w.done));
      for (const w of watchers) {
        expect([...w.seen.map((p) => p.id)].sort(), "every post of the burst, nothing else").to.deep.equal(
          [...ids].sort(),
        );
        expect(w.seen, "each once").to.have.length(ids.size);
        // The order of the feed's keyset: a client resuming after any of them misses none of the rest.
        for (let i = 1; i < w.seen.length; i++) {
          const [a, b] = [w.seen[i - 1]!, w.seen[i]!];
          expect(
            a.createdAt < b.createdAt || (a.createdAt === b.createdAt && a.id < b.id),
            `${a.id} before ${b.id} in (created_at, id) order`,
          ).to.equal(true);
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
          for await (const m of clients[clients.length - 1]!.watchPosts(
            { afterCursor: first.cursor },
            { ...alice, signal: controller.signal },
          )) {
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
      expect(summary.rejected.map((r) => [r.index, r.sku])).to.deep.equal([
        [2, "BAD"],
        [3, "no spaces allowed"],
      ]);
      const page = await clients[0]!.listCatalogItems({ page: 1, pageSize: 100 });
      expect(page.items.find((i) => i.sku === "BOOK-1")?.price).to.equal(1700n);
      expect(Number(page.total)).to.equal(6);
      const member = (await clients[0]!.importItems(items(), bob).catch((e: unknown) => e)) as ConnectError;
      expect([member.code, errorInfoOf(member)?.reason]).to.deep.equal([Code.PermissionDenied, "ROLE_REQUIRED"]);
      // The catalog is global: another tenant's admin may not rewrite it.
      const otherTenant = (await clients[0]!.importItems(items(), carol).catch((e: unknown) => e)) as ConnectError;
      expect([otherTenant.code, errorInfoOf(otherTenant)?.reason]).to.deep.equal([
        Code.PermissionDenied,
        "TENANT_MISMATCH",
      ]);
      expect(
        (await clients[0]!.listCatalogItems({ page: 1, pageSize: 100 })).items.find((i) => i.sku === "BOOK-1")?.price,
        "refused imports changed nothing",
      ).to.equal(1700n);
    });

    it("reads catalog items by sku without a token: those found, in the order asked, each once", async () => {
      const { items } = await clients[0]!.batchGetCatalogItems({ skus: ["MUG-1", "NOPE", "PEN-1", "MUG-1"] });
      expect(items.map((i) => [i.sku, i.price, i.currency])).to.deep.equal([
        ["MUG-1", 900n, "EUR"],
        ["PEN-1", 2500n, "EUR"],
      ]);
      expect((await clients[0]!.batchGetCatalogItems({ skus: [] })).items).to.deep.equal([]);
      const tooMany = (await clients[0]!
        .batchGetCatalogItems({ skus: Array.from({ length: 101 }, (_, i) => `S${i}`) })
        .catch((e: unknown) => e)) as ConnectError;
      expect(errorInfoOf(tooMany)?.reason).to.equal("INVALID_REQUEST");
      const malformed = (await clients[0]!
        .batchGetCatalogItems({ skus: ["no spaces"] })
        .catch((e: unknown) => e)) as ConnectError;
      expect(errorInfoOf(malformed)?.reason).to.equal("INVALID_REQUEST");
    });

    it("takes ImportItems from a client other than the serving library (connect's gRPC transport)", async () => {
      const connect = createClient(
        ContentService,
        createGrpcTransport({ baseUrl: `http://127.0.0.1:${replicas[0]!.server.port}` }),
      );
      async function* items() {
        yield { item: { sku: `VIA-CONNECT-${suffix}`, name: "Via connect", price: 42n, currency: "EUR" } };
        yield { item: { sku: `VIA-CONNECT-${suffix}`, name: "Via connect, again", price: 43n, currency: "EUR" } };
      }
      const summary = await connect.importItems(items(), { headers: alice.headers });
      expect([summary.created, summary.updated, summary.rejected.length]).to.deep.equal([1, 1, 0]);
    });

    // ---------------------------------------------------------------------------------------------
    // Import jobs

    const itemLine = (line: number, sku: string, price: bigint, name = `Item ${sku}`, currency = "EUR") => ({
      line,
      item: { sku, name, price, currency },
    });
    const problemLine = (line: number, message = "price must be of type integer") => ({
      line,
      problemCode: "INVALID_REQUEST",
      problemMessage: message,
    });
    const errorOf = (err: unknown) => [ConnectError.from(err).code, errorInfoOf(ConnectError.from(err))?.reason];

    async function finished(jobId: string, client = clients[0]!): Promise<ImportJob> {
      for (const until = Date.now() + 30_000; Date.now() < until; await sleep(50)) {
        const { job } = await client.getImportJob({ jobId }, alice);
        if (job!.status === ImportJobStatus.SUCCEEDED || job!.status === ImportJobStatus.FAILED) return job!;
      }
      throw new Error(`import job ${jobId} did not finish within 30 s`);
    }

    it("answers an import job at once, queued, then runs it in the background through ImportItems: counts and per-line errors", async () => {
      const lines: MessageInitShape<typeof ImportLineSchema>[] = [
        itemLine(1, `JOB-NEW-${suffix}`, 1_234n, "Made by a job"),
        itemLine(2, "MUG-1", 950n, "Switchyard mug"),
        problemLine(4, "unknown field colour"),
        itemLine(5, `JOB-NEG-${suffix}`, -1n),
        itemLine(7, `JOB-XXX-${suffix}`, 10n, "Odd money", "XXY"),
        itemLine(8, "no spaces allowed", 10n),
      ];
      const { job, replayed } = await clients[0]!.createImportJob({ idempotencyKey: randomUUID(), lines }, alice);
      expect(replayed).to.equal(false);
      expect(job!.id).to.match(/^imp_/);
      expect(
        [job!.status, job!.received, job!.imported, job!.failed, job!.errors.length],
        "recorded, not run yet",
      ).to.deep.equal([ImportJobStatus.QUEUED, 6, 0, 0, 0]);
      const done = await finished(job!.id, clients[clients.length - 1]);
      expect(done.status).to.equal(ImportJobStatus.SUCCEEDED);
      expect([done.received, done.imported, done.failed]).to.deep.equal([6, 2, 4]);
      expect(done.errors.map((e) => [e.line, e.code])).to.deep.equal([
        [4, "INVALID_REQUEST"],
        [5, "RULE_VIOLATION"],
        [7, "RULE_VIOLATION"],
        [8, "RULE_VIOLATION"],
      ]);
      expect(done.errors[0]!.message).to.equal("unknown field colour");
      expect(done.errors[1]!.message).to.match(/price/);
      expect(done.errors[2]!.message).to.match(/currency/);
      expect(done.failureMessage).to.equal("");
      expect(done.updateTime!.seconds >= done.createTime!.seconds).to.equal(true);
      const { items } = await clients[0]!.batchGetCatalogItems({
        skus: [`JOB-NEW-${suffix}`, "MUG-1", `JOB-NEG-${suffix}`, `JOB-XXX-${suffix}`],
      });
      expect(items.map((i) => [i.sku, i.name, i.price])).to.deep.equal([
        [`JOB-NEW-${suffix}`, "Made by a job", 1_234n],
        ["MUG-1", "Switchyard mug", 950n],
      ]);
      // Put the demo price back for the tests after this one.
      await clients[0]!.importItems(
        (async function* () {
          yield { item: { sku: "MUG-1", name: "Switchyard mug", price: 900n, currency: "EUR" } };
        })(),
        alice,
      );
    });

    it("makes one job per Idempotency-Key: the same lines again answer that job (replayed), other lines are IDEMPOTENCY_KEY_REUSED", async () => {
      const key = randomUUID();
      const lines = [itemLine(1, `IDEM-${suffix}`, 10n), problemLine(3)];
      const first = await clients[0]!.createImportJob({ idempotencyKey: key, lines }, alice);
      const done = await finished(first.job!.id);
      const again = await clients[clients.length - 1]!.createImportJob(
        { idempotencyKey: key.toUpperCase(), lines },
        alice,
      );
      expect(again.replayed).to.equal(true);
      expect(again.job!.id).to.equal(first.job!.id);
      expect(again.job!.status, "a replay answers the job as it is now").to.equal(ImportJobStatus.SUCCEEDED);
      expect([again.job!.imported, again.job!.failed]).to.deep.equal([done.imported, done.failed]);
      const other = await clients[0]!
        .createImportJob({ idempotencyKey: key, lines: [itemLine(1, `IDEM-${suffix}`, 11n), problemLine(3)] }, alice)
        .catch((e: unknown) => e);
      expect(errorOf(other)).to.deep.equal([Code.InvalidArgument, "IDEMPOTENCY_KEY_REUSED"]);
      const renumbered = await clients[0]!
        .createImportJob({ idempotencyKey: key, lines: [itemLine(1, `IDEM-${suffix}`, 10n), problemLine(2)] }, alice)
        .catch((e: unknown) => e);
      expect(errorOf(renumbered), "the line numbers are part of the request").to.deep.equal([
        Code.InvalidArgument,
        "IDEMPOTENCY_KEY_REUSED",
      ]);
      expect(
        (await clients[0]!.batchGetCatalogItems({ skus: [`IDEM-${suffix}`] })).items.map((i) => i.price),
        "imported once, by the first",
      ).to.deep.equal([10n]);
      // Another tenant's key space is its own: carol may not import at all, whatever the key.
      expect(
        errorOf(await clients[0]!.createImportJob({ idempotencyKey: key, lines }, carol).catch((e: unknown) => e)),
      ).to.deep.equal([Code.PermissionDenied, "TENANT_MISMATCH"]);
    });

    it("lets only the catalog owner's admins create jobs, and only the tenant's admins read them (another tenant's job does not exist)", async () => {
      const lines = [itemLine(1, `WHO-${suffix}`, 5n)];
      expect(
        errorOf(
          await clients[0]!.createImportJob({ idempotencyKey: randomUUID(), lines }, bob).catch((e: unknown) => e),
        ),
      ).to.deep.equal([Code.PermissionDenied, "ROLE_REQUIRED"]);
      expect(
        errorOf(
          await clients[0]!.createImportJob({ idempotencyKey: randomUUID(), lines }, carol).catch((e: unknown) => e),
        ),
      ).to.deep.equal([Code.PermissionDenied, "TENANT_MISMATCH"]);
      expect(
        errorOf(
          await clients[0]!.createImportJob({ idempotencyKey: randomUUID(), lines }, {}).catch((e: unknown) => e),
        ),
      ).to.deep.equal([Code.Unauthenticated, "UNAUTHENTICATED"]);
      expect(
        (await clients[0]!.batchGetCatalogItems({ skus: [`WHO-${suffix}`] })).items,
        "refused jobs import nothing",
      ).to.deep.equal([]);
      const { job } = await clients[0]!.createImportJob({ idempotencyKey: randomUUID(), lines }, alice);
      await finished(job!.id);
      expect(errorOf(await clients[0]!.getImportJob({ jobId: job!.id }, bob).catch((e: unknown) => e))).to.deep.equal([
        Code.PermissionDenied,
        "ROLE_REQUIRED",
      ]);
      expect(errorOf(await clients[0]!.getImportJob({ jobId: job!.id }, carol).catch((e: unknown) => e))).to.deep.equal(
        [Code.NotFound, "NOT_FOUND"],
      );
      for (const jobId of ["imp_AAAAAAAAAAAAAAAAAAAA", "nonsense", ""])
        expect(errorOf(await clients[0]!.getImportJob({ jobId }, alice).catch((e: unknown) => e)), jobId).to.deep.equal(
          [Code.NotFound, "NOT_FOUND"],
        );
    });

    it("refuses a job that is no list of lines: none, too many, misnumbered, a line with neither item nor problem, a bad key", async () => {
      const send = (lines: MessageInitShape<typeof ImportLineSchema>[], key: string = randomUUID()) =>
        clients[0]!.createImportJob({ idempotencyKey: key, lines }, alice).catch((e: unknown) => e);
      expect(errorOf(await send([]))).to.deep.equal([Code.InvalidArgument, "INVALID_REQUEST"]);
      expect(errorOf(await send(Array.from({ length: 10_001 }, (_, i) => problemLine(i + 1))))).to.deep.equal([
        Code.InvalidArgument,
        "RULE_VIOLATION",
      ]);
      expect(errorOf(await send([itemLine(2, "A-1", 1n), itemLine(2, "A-2", 1n)]))).to.deep.equal([
        Code.InvalidArgument,
        "INVALID_REQUEST",
      ]);
      expect(errorOf(await send([itemLine(0, "A-1", 1n)]))).to.deep.equal([Code.InvalidArgument, "INVALID_REQUEST"]);
      expect(errorOf(await send([{ line: 1 }]))).to.deep.equal([Code.InvalidArgument, "INVALID_REQUEST"]);
      expect(errorOf(await send([{ line: 1, problemCode: "INTERNAL", problemMessage: "x" }]))).to.deep.equal([
        Code.InvalidArgument,
        "INVALID_REQUEST",
      ]);
      expect(errorOf(await send([itemLine(1, "A-1", 1n)], "not-a-uuid"))).to.deep.equal([
        Code.InvalidArgument,
        "IDEMPOTENCY_KEY_INVALID",
      ]);
    });

    it("runs a large job chunk by chunk and keeps only its first 100 per-line errors; a NUL in a message is stored harmlessly", async () => {
      const lines: MessageInitShape<typeof ImportLineSchema>[] = [];
      for (let i = 1; i <= 400; i++)
        lines.push(
          i % 2 === 0
            ? itemLine(i, `BULK-${suffix}-${i}`, BigInt(i))
            : problemLine(i, i === 1 ? "unknown field a\u0000b" : `bad line ${i}`),
        );
      const { job } = await clients[0]!.createImportJob({ idempotencyKey: randomUUID(), lines }, alice);
      const done = await finished(job!.id);
      expect([done.status, done.received, done.imported, done.failed]).to.deep.equal([
        ImportJobStatus.SUCCEEDED,
        400,
        200,
        200,
      ]);
      expect(done.errors.map((e) => e.line)).to.deep.equal(Array.from({ length: 100 }, (_, i) => 2 * i + 1));
      expect(done.errors[0]!.message).to.equal("unknown field a\ufffdb");
      const page = await clients[0]!.batchGetCatalogItems({ skus: [`BULK-${suffix}-2`, `BULK-${suffix}-400`] });
      expect(page.items.map((i) => i.price)).to.deep.equal([2n, 400n]);
    });

    it("takes up a job left running by a crashed process exactly where it stopped, and fails one interrupted for the third time", async () => {
      const request = (sku: string) =>
        toBinary(
          ImportItemsRequestSchema,
          create(ImportItemsRequestSchema, { item: { sku, name: `Crash ${sku}`, price: 7n, currency: "EUR" } }),
        );
      const resumed = `imp_${randomBytes(15).toString("base64url")}`;
      const doomed = `imp_${randomBytes(15).toString("base64url")}`;
      // What a process that died mid-job leaves behind: the job running under its lease, the first two
      // lines done (their effects committed with the progress), the rest still to run. The lease is
      // still good on embedded storage (only a new start can tell it is orphaned) and has run out on
      // the server (where other replicas may be alive, so only an expired lease may be taken over).
      const leaseUntil = engine.databaseUrl
        ? "clock_timestamp() - interval '1 second'"
        : "clock_timestamp() + interval '1 hour'";
      const leaveCrashedJobs = async (db: SqlDatabase) =>
        db.transaction(async (tx) => {
          for (const [id, interruptions] of [
            [resumed, 0],
            [doomed, 2],
          ] as const) {
            await tx.query(
              `INSERT INTO import_jobs (id, tenant_id, created_by, status, received, imported, next_position, interruptions, lease_owner, lease_until)
               VALUES ($1, 'acme', 1, 'running', 4, 2, 2, $2, 'runner_of_a_dead_process', ${leaseUntil})`,
              [id, interruptions],
            );
            for (let position = 0; position < 4; position++) {
              await tx.query(`INSERT INTO import_job_lines (job_id, position, line, request) VALUES ($1, $2, $3, $4)`, [
                id,
                position,
                position + 1,
                request(`CRASH-${id}-${position}`),
              ]);
            }
          }
        });
      if (engine.databaseUrl) {
        const db = await openSqlDatabase({ databaseUrl: engine.databaseUrl, schema, migrations: contentMigrations });
        await leaveCrashedJobs(db);
        await db.close();
      } else {
        // Embedded storage belongs to one process: stop it, leave the crash behind, start it again.
        await replicas[0]!.stop();
        const db = await openSqlDatabase({ dataDir: join(dataDir, "content"), schema, migrations: contentMigrations });
        await leaveCrashedJobs(db);
        await db.close();
        replicas[0] = await startReplica();
        const channel = openChannel(`127.0.0.1:${replicas[0].server.port}`);
        channels.push(channel);
        clients[0] = createServiceClient(ContentService, channel);
      }
      const job = await finished(resumed);
      expect([job.status, job.received, job.imported, job.failed]).to.deep.equal([ImportJobStatus.SUCCEEDED, 4, 4, 0]);
      const skus = [0, 1, 2, 3].map((p) => `CRASH-${resumed}-${p}`);
      const found = (await clients[0]!.batchGetCatalogItems({ skus })).items.map((i) => i.sku);
      expect(found, "resumed after the lines that were done, not from the start").to.deep.equal(skus.slice(2));
      const failed = await finished(doomed);
      expect(failed.status).to.equal(ImportJobStatus.FAILED);
      expect(failed.failureMessage).to.match(/interrupted 3 times/);
      expect(
        (await clients[0]!.batchGetCatalogItems({ skus: [2, 3].map((p) => `CRASH-${doomed}-${p}`) })).items,
        "a failed job runs no further line",
      ).to.deep.equal([]);
    });
  });
}
