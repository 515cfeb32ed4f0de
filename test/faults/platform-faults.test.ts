// Platform faults through the real mesh: the ground moving under it while clients pay, cancel, write
// documents, post, import and read. The mesh runs two replicas of payments, orders and content on a
// PostgreSQL server and a Redis of this suite's own (initdb/pg_ctl and redis-server of the machine,
// on ports and directories of their own: restarted and stopped here, never the shared ones). Each
// fault: PostgreSQL restarted (-m fast, -m immediate), its backends terminated, down for 30 s; Redis
// and identity down for 30 s; every replica of a service killed at once. After each: no process
// exited, no answer was a 500, and once the services answer again the money, documents, posts and
// import jobs hold — checked by querying the services. FAULTS_LOG_DIR=<dir> runs the mesh at debug level
// and writes its log and the posts made there when the live feed misses one.
import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { request, type ClientRequest, type IncomingMessage } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { Health, HealthCheckResponse_ServingStatus as Status } from "@switchyard/gen/health/v1/health_pb.js";
import { createServiceClient, openChannel, RETRY_BUDGET } from "@switchyard/platform/grpc";
import { LIVENESS } from "@switchyard/platform/server.js";
import { startPostgresServer, type PostgresServer } from "../../services/platform/test/support/postgres-server.js";
import { startRedisServer, type RedisServer } from "../support/redis-server.js";
import { ALICE, BOB, newKey, startE2eMesh, unique, type ApiResponse, type E2eMesh } from "../support/http.js";

/** How long the services' checks of their database fail before readiness turns NOT_SERVING, here. */
const UNREADY_AFTER_MS = 2_000;
const OUTAGE_MS = 30_000;
const SERVICES = ["identity", "payments", "orders", "content"] as const;
type ServiceName = (typeof SERVICES)[number];

/** The figures docs/operations.md quotes (recovery after a restart), printed when the suite ends. */
const figures: string[] = [];

describe("e2e: platform faults (a PostgreSQL server and a Redis of its own)", function () {
  this.timeout(180_000);
  let pg: PostgresServer;
  let redis: RedisServer;
  let env: E2eMesh;
  let alice: string;
  let bob: string;
  let paymentId: string;

  before(async function () {
    this.timeout(180_000);
    const server = await startPostgresServer();
    if ("skip" in server) {
      console.log(`  (platform faults skipped: ${server.skip})`);
      return this.skip();
    }
    pg = server;
    const cache = await startRedisServer();
    if ("skip" in cache) {
      await pg.destroy();
      console.log(`  (platform faults skipped: ${cache.skip})`);
      return this.skip();
    }
    redis = cache;
    env = await startE2eMesh("platform-faults", {
      replicas: { payments: 2, orders: 2, content: 2 },
      metrics: true,
      env: {
        DATABASE_URL: pg.url,
        REDIS_URL: redis.url,
        SIGNING_KEY_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
        DEMO_DATA_FORCE: "true",
        DATABASE_UNREADY_AFTER_MS: String(UNREADY_AFTER_MS),
        ...(process.env.FAULTS_LOG_DIR ? { LOG_LEVEL: "debug" } : {}),
        ORDERS_RECONCILE_INTERVAL_MS: "500",
        // The demo's catalog owner (alice) imports into the catalog.
        CATALOG_OWNER_TENANT: "acme",
      },
    });
    [alice, bob] = await Promise.all([env.api.login(ALICE), env.api.login(BOB)]);
    const payment = await env.api.post("/v1/payments", {
      token: alice,
      key: newKey(),
      json: { amount: 1_200, currency: "EUR", source: "tok_faults" },
    });
    expect(payment.status, payment.text).to.equal(201);
    paymentId = payment.json.id as string;
  });

  after(async function () {
    this.timeout(60_000);
    await env?.stop();
    await redis?.stop();
    await pg?.destroy();
    if (figures.length > 0) console.log(`      platform faults: ${figures.join("; ")}`);
  });

  afterEach(function () {
    if (!env) return;
    expect(env.mesh.unexpectedExits(), "no process exited").to.deep.equal([]);
    const crashes = env.mesh.logs
      .join("")
      .split("\n")
      .filter((l) => /Unhandled 'error' event|uncaught|failed with an internal error/i.test(l));
    expect(crashes, "no unhandled error in any log").to.deep.equal([]);
  });

  // ---- probes and measurements ----

  const replicaPorts = (name: ServiceName) => env.mesh.replicaPorts[name];
  async function health(port: number, service: string): Promise<string> {
    const channel = openChannel(`127.0.0.1:${port}`);
    try {
      const reply = await createServiceClient(Health, channel).check({ service }, { timeoutMs: 1_000 });
      return Status[reply.status];
    } catch {
      return "UNREACHABLE";
    } finally {
      channel.close();
    }
  }
  const everyReplica = async (service: string) =>
    (await Promise.all(SERVICES.flatMap((s) => replicaPorts(s).map((port) => health(port, service))))).sort();

  async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<number> {
    const started = Date.now();
    while (!(await check().catch(() => false))) {
      if (Date.now() - started > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
      await sleep(20);
    }
    return Date.now() - started;
  }

  async function metric(service: ServiceName | "gateway", name: string, labels = ""): Promise<number | undefined> {
    const url =
      service === "gateway"
        ? `${env.mesh.gatewayUrl}/metrics`
        : `http://127.0.0.1:${env.mesh.metricsPorts[service][0]}/metrics`;
    const text = await (await fetch(url)).text();
    // Every series of the name (the registry adds labels of its own), the one with `labels` among its labels.
    const line = text
      .split("\n")
      .find((l) => (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) && l.includes(labels));
    return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
  }

  /** After PostgreSQL is back: when the first read answered 2xx, and when every replica was ready again. */
  async function recovery(label: string): Promise<{ firstOkMs: number; allServingMs: number }> {
    const firstOk = until(
      "the first 2xx",
      async () => (await env.api.get(`/v1/payments/${paymentId}`, { token: alice })).status === 200,
    );
    const allServing = until("every replica serving", async () =>
      (await everyReplica("")).every((s) => s === "SERVING"),
    );
    const [firstOkMs, allServingMs] = await Promise.all([firstOk, allServing]);
    figures.push(`${label}: first 2xx ${firstOkMs} ms, every replica serving ${allServingMs} ms`);
    return { firstOkMs, allServingMs };
  }

  // ---- the clients' traffic, and what it leaves ----

  class Traffic {
    readonly answers = new Map<string, number>();
    readonly bad: string[] = [];
    readonly orders: number[] = [];
    readonly paymentKeys = new Map<string, "answered" | "unknown">();
    readonly docs = new Map<string, { acked: string; maybe: Set<string> }>();
    readonly posted = new Set<string>();
    readonly maybePosted = new Set<string>();
    readonly jobs: string[] = [];
    readonly postLog: string[] = [];
    private running = true;
    private readonly loops: Promise<void>[] = [];

    constructor(private readonly allowed: (res: ApiResponse) => boolean) {
      this.loop(() => this.read(), 4);
      this.loop(() => this.payAndCancel(), 2);
      this.loop(() => this.pay(), 1);
      this.loop(() => this.writeDocument(), 1);
      this.loop(() => this.post(), 1);
      this.loop(() => this.importItems(), 1);
    }

    private loop(step: () => Promise<void>, n: number): void {
      for (let i = 0; i < n; i++)
        this.loops.push(
          (async () => {
            while (this.running) {
              await step().catch((err: unknown) => this.bad.push(`client error: ${String(err)}`));
              await sleep(10);
            }
          })(),
        );
    }

    private note(what: string, res: ApiResponse): ApiResponse {
      const key = `${what} ${res.status}${res.status >= 400 ? ` ${String(res.json?.code)}` : ""}`;
      this.answers.set(key, (this.answers.get(key) ?? 0) + 1);
      if (!this.allowed(res) && !(res.status < 300)) this.bad.push(`${what}: ${res.status} ${res.text}`);
      if (res.status === 503 && res.headers.get("retry-after") === null)
        this.bad.push(`${what}: a 503 without Retry-After`);
      return res;
    }

    private async read() {
      this.note("read", await env.api.get(`/v1/payments/${paymentId}`, { token: alice }));
    }

    private async payAndCancel() {
      const made = this.note(
        "order",
        await env.api.post("/v1/orders", {
          token: bob,
          json: { currency: "EUR", items: [{ sku: "BOOK-1", quantity: 1 }] },
        }),
      );
      if (made.status !== 201) return;
      const id = made.json.id as number;
      this.orders.push(id);
      const paid = this.note(
        "pay",
        await env.api.post(`/v1/orders/${id}/payment`, { token: bob, json: { source: "tok_visa" } }),
      );
      if (paid.status === 201 && id % 2 === 0)
        this.note("cancel", await env.api.post(`/v1/orders/${id}/cancel`, { token: bob }));
    }

    private async pay() {
      // A careful client: the same key until it has an answer.
      const key = newKey();
      this.paymentKeys.set(key, "unknown");
      for (let attempt = 0; attempt < 20 && this.running; attempt++) {
        const res = this.note(
          "payment",
          await env.api.post("/v1/payments", {
            token: alice,
            key,
            json: { amount: 300, currency: "EUR", source: `tok_${key}` },
          }),
        );
        if (res.status === 201 || res.status === 200) {
          this.paymentKeys.set(key, "answered");
          return;
        }
        await sleep(100);
      }
    }

    private async writeDocument() {
      const created = this.note(
        "document",
        await env.api.post("/v1/docs", { token: alice, json: { title: `d-${unique()}`, body: "v0" } }),
      );
      if (created.status !== 201) return;
      const id = created.json.id as string;
      const doc = { acked: "v0", maybe: new Set<string>() };
      this.docs.set(id, doc);
      let etag = created.headers.get("etag")!;
      for (let v = 1; v <= 5 && this.running; v++) {
        const body = `v${v}`;
        const res = this.note(
          "document update",
          await env.api.request("PUT", `/v1/docs/${id}`, {
            token: alice,
            headers: { "if-match": etag },
            json: { title: "t", body },
          }),
        );
        if (res.status === 200) {
          doc.acked = body;
          doc.maybe.clear();
          etag = res.headers.get("etag")!;
        } else if (res.status >= 500) {
          doc.maybe.add(body);
          return;
        } else {
          return;
        }
      }
    }

    private async post() {
      const title = `post-${unique()}`;
      this.maybePosted.add(title);
      const sent = new Date().toISOString();
      const res = this.note("post", await env.api.post("/v1/posts", { token: alice, json: { title, body: "faults" } }));
      if (process.env.FAULTS_LOG_DIR)
        this.postLog.push(
          `${sent} → ${new Date().toISOString()} ${title} ${res.status} ${String(res.json?.id)} ${String(res.json?.created_at)}`,
        );
      if (res.status === 201) this.posted.add(title);
    }

    private async importItems() {
      const sku = `IMP-${unique()}`;
      const res = this.note(
        "import",
        await env.api.post("/v1/catalog/imports", {
          token: alice,
          key: newKey(),
          json: [1, 2, 3].map((n) => ({ sku: `${sku}-${n}`, name: "Imported", price: 100 * n, currency: "EUR" })),
        }),
      );
      if (res.status === 202) this.jobs.push(res.headers.get("location")!);
      await sleep(200);
    }

    async stop(): Promise<void> {
      this.running = false;
      await Promise.all(this.loops);
    }
  }

  /** Nothing half-done: every order settled and charged once or not at all, every payment key one payment, documents and jobs whole. */
  async function expectInvariants(traffic: Traffic): Promise<void> {
    expect(traffic.bad, "no 500 and nothing but the answers a fault allows").to.deep.equal([]);
    const payments = (await env.api.listAll("/v1/payments", alice)) as {
      id: string;
      amount: number;
      amount_refunded: number;
      source: string;
      reference: string | null;
    }[];
    // Orders: each settles (the reconciler), then holds its one charge (paid), all of it refunded (cancelled after paying), or none.
    for (const id of traffic.orders) {
      let order:
        { status: string; total: number; step_in_progress: string | null; payment_id: string | null } | undefined;
      await until(`order ${id} settled`, async () => {
        const res = await env.api.get(`/v1/orders/${id}`, { token: bob });
        order = res.json;
        return res.status === 200 && order!.step_in_progress === null;
      });
      const charges = payments.filter((p) => p.reference === `order:${id}`);
      if (order!.status === "paid" || order!.status === "shipped") {
        expect(
          charges.map((c) => c.id),
          `order ${id}: one charge`,
        ).to.deep.equal([order!.payment_id]);
        expect(charges[0]!.amount).to.equal(order!.total);
      } else if (order!.status === "cancelled") {
        for (const c of charges)
          expect(c.amount_refunded, `order ${id}: a cancelled order's charge refunded`).to.equal(c.amount);
      } else {
        expect(charges, `order ${id} (${order!.status}): no charge`).to.deep.equal([]);
      }
    }
    // Payments by key: one payment for each key answered, at most one for a key never answered.
    for (const [key, state] of traffic.paymentKeys) {
      const made = payments.filter((p) => p.source === `tok_${key}`).length;
      if (state === "answered") expect(made, `key ${key}: one payment`).to.equal(1);
      else expect(made, `key ${key}: at most one payment`).to.be.at.most(1);
    }
    // Documents: what was last acknowledged, or one of the writes whose answer never came.
    for (const [id, doc] of traffic.docs) {
      const res = await env.api.get(`/v1/docs/${id}`, { token: alice });
      expect(res.status, res.text).to.equal(200);
      expect([doc.acked, ...doc.maybe], `document ${id}`).to.include(res.json.body);
    }
    // Import jobs: each ends, succeeded with every line imported.
    for (const location of traffic.jobs) {
      let job: { status: string; counts: { received: number; imported: number } } | undefined;
      await until(`${location} to finish`, async () => {
        const res = await env.api.get(location, { token: alice });
        job = res.json;
        return res.status === 200 && (job!.status === "succeeded" || job!.status === "failed");
      });
      expect(job!.status, `${location}`).to.equal("succeeded");
      expect(job!.counts.imported).to.equal(3);
    }
  }

  /** A live feed reader that resumes with Last-Event-ID whenever its stream ends, as an EventSource does. */
  class FeedReader {
    readonly titles: string[] = [];
    readonly errors: string[] = [];
    private lastId: string | undefined;
    private req: ClientRequest | undefined;
    private running = true;
    private readonly done: Promise<void>;
    private markReady: () => void = () => {};
    /** Resolves once the first stream is answered: the gateway answers once the upstream confirmed the subscription. */
    readonly ready = new Promise<void>((resolve) => (this.markReady = resolve));

    constructor(private readonly token: string) {
      this.done = (async () => {
        while (this.running) {
          await this.once();
          if (this.running) await sleep(200);
        }
      })();
    }

    private once(): Promise<void> {
      const url = new URL(`${env.mesh.gatewayUrl}/v1/posts`);
      return new Promise<void>((resolve) => {
        const headers: Record<string, string> = { authorization: `Bearer ${this.token}`, accept: "text/event-stream" };
        if (this.lastId) headers["last-event-id"] = this.lastId;
        this.req = request(
          { host: url.hostname, port: url.port, path: url.pathname, headers },
          (res: IncomingMessage) => {
            if (res.statusCode === 200) this.markReady();
            let pending = "";
            res.setEncoding("utf8").on("data", (chunk: string) => {
              pending += chunk;
              let end: number;
              while ((end = pending.indexOf("\n\n")) !== -1) {
                const block = pending.slice(0, end);
                pending = pending.slice(end + 2);
                const id = /^id: (.*)$/m.exec(block)?.[1];
                const data = /^data: (.*)$/m.exec(block)?.[1];
                if (/^event: post$/m.test(block) && id && data) {
                  this.lastId = id;
                  this.titles.push((JSON.parse(data) as { title: string }).title);
                } else if (/^event: error$/m.test(block)) {
                  this.errors.push(data ?? "");
                }
              }
            });
            res.on("close", () => resolve());
            res.on("error", () => resolve());
          },
        );
        this.req.on("error", () => resolve());
        this.req.end();
      });
    }

    async stop(): Promise<void> {
      this.running = false;
      this.req?.destroy();
      await this.done;
    }
  }

  /** Every post answered 201 reached the feed once, in the order of the feed, and nothing else did. */
  async function expectFeed(feed: FeedReader, traffic: Traffic): Promise<void> {
    const missing = () => [...traffic.posted].filter((t) => !feed.titles.includes(t));
    await until("every acknowledged post on the live feed", async () => missing().length === 0).catch(
      async (err: unknown) => {
        // Say what is missing, and where the listing has it, next to what the feed delivered.
        if (process.env.FAULTS_LOG_DIR) {
          const fs = await import("node:fs");
          fs.writeFileSync(`${process.env.FAULTS_LOG_DIR}/mesh.log`, env.mesh.logs.join(""));
          fs.writeFileSync(
            `${process.env.FAULTS_LOG_DIR}/posts.log`,
            traffic.postLog.join("\n") + "\n---\n" + feed.titles.join("\n"),
          );
        }
        const listed = ((await env.api.listAll("/v1/posts", alice)) as { id: string; title: string }[]).map(
          (p) => `${p.id} ${p.title}`,
        );
        throw new Error(
          `${String(err)}: missing ${JSON.stringify(missing())}; feed ended with ${JSON.stringify(feed.errors)}; ` +
            `feed order ${JSON.stringify(feed.titles.slice(-12))}; listing (newest first) ${JSON.stringify(listed.slice(0, 12))}`,
        );
      },
    );
    const ours = feed.titles.filter((t) => traffic.maybePosted.has(t));
    expect(new Set(ours).size, "no post twice").to.equal(ours.length);
  }

  const storeFaultAllowed = (res: ApiResponse) =>
    // While the database is away: 503 (the store, or a peer not ready in time), 504 (a step whose outcome
    // is unknown), 409 (a money step under way); the edge never answers 500.
    res.status === 503 ||
    res.status === 504 ||
    (res.status === 409 && res.json?.code === "STEP_IN_PROGRESS") ||
    (res.status === 502 && res.json?.code === "UPSTREAM_UNAVAILABLE");

  // ---- the faults ----

  for (const mode of ["fast", "immediate"] as const) {
    it(`PostgreSQL restarted (-m ${mode}) under traffic: no process exits, no 500; served again within a second, every replica within five; nothing half-done`, async () => {
      const feed = new FeedReader(alice);
      // Posts made before the feed is subscribed are not its (it starts from now).
      await feed.ready;
      const traffic = new Traffic(storeFaultAllowed);
      await sleep(1_500);
      await pg.restart(mode);
      const { firstOkMs, allServingMs } = await recovery(`-m ${mode}`);
      await sleep(1_500);
      await traffic.stop();
      expect(firstOkMs, "the first 2xx within 1 s of the return").to.be.below(1_000);
      expect(allServingMs, "every replica serving within 5 s").to.be.below(5_000);
      await expectInvariants(traffic);
      await expectFeed(feed, traffic);
      await feed.stop();
    });
  }

  it("every backend terminated (pg_terminate_backend) under traffic: no process exits, nothing half-done", async () => {
    const feed = new FeedReader(alice);
    await feed.ready;
    const traffic = new Traffic(storeFaultAllowed);
    await sleep(1_000);
    expect(await pg.terminateBackends()).to.be.above(0);
    await sleep(1_000);
    await pg.terminateBackends();
    await sleep(1_500);
    await traffic.stop();
    await expectInvariants(traffic);
    await expectFeed(feed, traffic);
    await feed.stop();
  });

  it("PostgreSQL down for 30 s: 503 STORE_UNAVAILABLE with Retry-After in the store's words; alive, not ready; a replica started meanwhile waits; back without a restart", async function () {
    this.timeout(OUTAGE_MS + 90_000);
    const traffic = new Traffic(storeFaultAllowed);
    await sleep(1_000);
    await pg.stop("fast");
    const stopped = Date.now();
    try {
      const res = await env.api.get(`/v1/payments/${paymentId}`, { token: alice });
      expect([res.status, res.json?.code, res.headers.get("retry-after")]).to.deep.equal([
        503,
        "STORE_UNAVAILABLE",
        "1",
      ]);
      expect(res.json.error).to.match(/database is unavailable/);
      expect(res.text).to.not.match(/ECONNREFUSED|5432|127\.0\.0\.1|postgres:/);
      expect(await everyReplica(""), "readiness holds through a blip").to.satisfy((s: string[]) =>
        s.includes("SERVING"),
      );
      await until("readiness NOT_SERVING everywhere", async () =>
        (await everyReplica("")).every((s) => s === "NOT_SERVING"),
      );
      expect(Date.now() - stopped, "not before the stated time").to.be.at.least(UNREADY_AFTER_MS);
      expect(await everyReplica(LIVENESS), "liveness never follows the database").to.satisfy((s: string[]) =>
        s.every((x) => x === "SERVING"),
      );
      expect(await metric("payments", "switchyard_db_reachable")).to.equal(0);
      // A replica that starts now waits for the database, saying so, instead of exiting.
      await env.mesh.restartService("payments", 1, { untilServing: false });
      const port = replicaPorts("payments")[1]!;
      await until("the new replica listens", async () => (await health(port, LIVENESS)) === "SERVING");
      expect(await health(port, "")).to.equal("NOT_SERVING");
      await sleep(Math.max(0, OUTAGE_MS - (Date.now() - stopped)));
      expect(env.mesh.logsOf("payments", 1).join("")).to.include("waiting for the database");
    } finally {
      await pg.start();
    }
    const { firstOkMs, allServingMs } = await recovery("after 30 s down");
    await sleep(1_000);
    await traffic.stop();
    expect(firstOkMs).to.be.below(1_000);
    expect(allServingMs).to.be.below(5_000);
    await expectInvariants(traffic);
  });

  it("Redis and identity down for 30 s: tokens still verified with the keys held, logins 503 with Retry-After, quotas counted in each process and said so; both back without a restart, and a logout made at the outage's edge applies within 2 s", async function () {
    this.timeout(OUTAGE_MS + 60_000);
    // Sessions logged out while identity is killed: a logout that answered 204 may not have reached anyone.
    const sessionOf = (token: string) =>
      (JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString()) as { sid: string }).sid;
    const tokens = await Promise.all(Array.from({ length: 12 }, () => env.api.login(BOB)));
    for (const token of tokens) expect((await env.api.get("/v1/payments", { token })).status).to.equal(200);
    await redis.stop();
    const loggedOut: string[] = [];
    let killed = false;
    const logouts = (async () => {
      for (const token of tokens) {
        if (killed) return;
        const res = await env.api.delete(`/v1/tenants/acme/sessions/${sessionOf(token)}`, { token });
        if (res.status === 204) loggedOut.push(token);
        else expect(killed, `a logout refused before identity went: ${res.status} ${res.text}`).to.equal(true);
      }
    })();
    await until("a few logouts", async () => loggedOut.length >= 4);
    killed = true;
    await env.mesh.stopService("identity", "SIGKILL");
    await logouts;
    expect(loggedOut.length, "identity went while logouts were being made").to.be.below(tokens.length);
    const down = Date.now();
    try {
      const read = await env.api.get(`/v1/payments/${paymentId}`, { token: alice });
      expect(read.status, "a token verified with the keys held").to.equal(200);
      expect(read.headers.get("x-ratelimit-limit"), "the quota still counted").to.not.equal(null);
      const login = await env.api.post("/v1/tenants/acme/sessions", {
        json: { email: ALICE.email, password: "demo-password" },
      });
      expect([login.status, login.json?.code, login.headers.get("retry-after")]).to.deep.equal([
        503,
        "UPSTREAM_UNREACHABLE",
        "1",
      ]);
      await until(
        "the gateway to say Redis is away",
        async () => (await metric("gateway", "switchyard_redis_connected", 'purpose="quotas"')) === 0,
      );
      await until(
        "payments to say it does not follow revocations",
        async () => (await metric("payments", "switchyard_revocations_followed")) === 0,
      );
      await sleep(Math.max(0, OUTAGE_MS - (Date.now() - down)));
    } finally {
      await redis.start();
      await env.mesh.restartService("identity");
    }
    // Every verifier follows again and refuses every logged-out token within 2 s of identity's return.
    const refusedMs = await until("the logged-out tokens refused", async () => {
      const statuses = await Promise.all(
        loggedOut.flatMap((token) => [
          env.api.get("/v1/payments", { token }),
          env.api.get("/v1/docs/doc_none", { token }),
        ]),
      );
      return statuses.every((r) => r.status === 401);
    });
    figures.push(`${loggedOut.length} logouts made as identity was killed refused ${refusedMs} ms after its return`);
    expect(refusedMs).to.be.below(2_000);
    await until(
      "the gateway's Redis back",
      async () => (await metric("gateway", "switchyard_redis_connected", 'purpose="quotas"')) === 1,
    );
    await until(
      "payments following again",
      async () => (await metric("payments", "switchyard_revocations_followed")) === 1,
    );
    expect(
      (await env.api.post("/v1/tenants/acme/sessions", { json: { email: ALICE.email, password: "demo-password" } }))
        .status,
    ).to.equal(201);
  });

  for (const signal of ["SIGTERM", "SIGKILL"] as const) {
    it(`identity, the one replica it has, restarted (${signal}) under six readers: no read fails, it only waits`, async () => {
      const statuses: number[] = [];
      let running = true;
      const readers = Array.from({ length: 6 }, async () => {
        while (running) {
          statuses.push((await env.api.get("/v1/tenants/acme/users/1", { token: alice })).status);
          await sleep(5);
        }
      });
      await sleep(500);
      await env.mesh.stopService("identity", signal);
      await env.mesh.restartService("identity");
      await sleep(1_000);
      running = false;
      await Promise.all(readers);
      const failed = statuses.filter((s) => s !== 200);
      figures.push(`identity restarted (${signal}): ${statuses.length} reads, ${failed.length} not 200`);
      expect(failed, "every read answered 200").to.deep.equal([]);
    });
  }

  it("every replica of payments killed at once and started again, under six readers: no read fails, it only waits", async () => {
    const statuses: number[] = [];
    let running = true;
    const readers = Array.from({ length: 6 }, async () => {
      while (running) {
        statuses.push((await env.api.get(`/v1/payments/${paymentId}`, { token: alice })).status);
        await sleep(5);
      }
    });
    // A read cut by its replica's death is retried within the gateway's retry budget toward payments
    // (gRFC A6): every UNAVAILABLE answer costs a token, every answered call earns a tenth of one, and
    // nothing is retried at half or less. The database outage above spent it (each STORE_UNAVAILABLE
    // counts), so the readers first earn it back — from empty, maxTokens ÷ tokenRatio answers fill it.
    const refill = RETRY_BUDGET.maxTokens / RETRY_BUDGET.tokenRatio;
    await until(`${refill} reads answered (the retry budget full again)`, async () => statuses.length >= refill);
    await Promise.all([0, 1].map((replica) => env.mesh.stopService("payments", "SIGKILL", replica)));
    // Down for a while, as a node's restart would leave them: every read in that time waits.
    await sleep(1_000);
    await Promise.all([0, 1].map((replica) => env.mesh.restartService("payments", replica)));
    await sleep(1_000);
    running = false;
    await Promise.all(readers);
    const failed = statuses.filter((s) => s !== 200);
    figures.push(`payments killed and restarted: ${statuses.length} reads, ${failed.length} not 200`);
    expect(failed, "every read answered 200").to.deep.equal([]);
  });
});
