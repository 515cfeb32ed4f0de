// Property-based fuzzing of the public API through the real mesh: thousands of malformed and hostile
// requests generated from the OpenAPI document (request-arbitraries.ts), each checked against what
// the document says its answer must be (oracle.ts). For every answer: no 5xx and no dropped
// connection; the expected status (the right 4xx class for every hostile request, 2xx only where the
// request happens to be valid); the error envelope {error, code} with exactly those keys — plus
// `details`, of the documented keys, for the codes that carry them — and a code of the document;
// Allow on 405; WWW-Authenticate on 401; the rate-limit headers. Afterwards every
// process still runs, /readyz is 200, nothing went wrong in the logs, and the stored data is exactly
// what it was before.
//
// `npm test` runs it with a fixed seed and FUZZ_RUNS (default 2000) requests; `npm run fuzz` runs
// 20 000 with a random seed. A failure prints the seed: FUZZ_SEED=<seed> FUZZ_RUNS=<n> replays it.
import { expect } from "chai";
import fc from "fast-check";
import {
  ALICE,
  BOB,
  CAROL,
  MESH_PROCESSES,
  errorEnvelopeProblem,
  jwtPayload,
  newKey,
  startE2eMesh,
  type Api,
  type ApiResponse,
  type E2eMesh,
} from "../support/http.js";
import { loadApiModel, type ApiModel } from "./openapi-model.js";
import {
  holderOf,
  MODELLED_OPERATIONS,
  nodeHeaders,
  type Holder,
  type Outcome,
  type TenantFixtures,
  type World,
} from "./oracle.js";
import { createFuzzer, describeOutcomes, type FuzzRequest } from "./request-arbitraries.js";
import { send, type RawResponse } from "./raw-http.js";
import { FuzzCredentials } from "./credentials.js";

function envNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${name} must be a whole number, not ${JSON.stringify(raw)}`);
  return n;
}

/** Requests in the whole run, shared out among the properties. */
const RUNS = envNumber("FUZZ_RUNS", 2_000);
const SEED =
  process.env.FUZZ_SEED === "random" ? Math.floor(Math.random() * 2 ** 31) : envNumber("FUZZ_SEED", 20_240_611);
/** Requests in flight at once. */
const CONCURRENCY = 6;
/** Average batch length of fc.array({ minLength: 1, maxLength: CONCURRENCY }), measured. */
const AVERAGE_BATCH = 3.2;
const REQUEST_TIMEOUT_MS = 20_000;

const PROPERTIES = [
  { name: "bodies", share: 0.4, title: "mutated and raw hostile bodies for every operation with a request body" },
  { name: "paths", share: 0.3, title: "hostile paths, methods, path and query parameters for every operation" },
  { name: "headers", share: 0.22, title: "garbage credentials and abused headers" },
  { name: "protocol", share: 0.08, title: "requests that break HTTP itself" },
] as const;

type PropertyName = (typeof PROPERTIES)[number]["name"];

describe("fuzz: hostile requests generated from the OpenAPI document", function () {
  this.timeout(120_000 + RUNS * 60);

  const model: ApiModel = loadApiModel();
  let env: E2eMesh;
  let api: Api;
  let port: number;
  let world: World;
  /** The holders' tokens, renewed while the run lasts (world.tokens keeps the first, which requests are made with). */
  let credentials: FuzzCredentials;
  let fuzzer: ReturnType<typeof createFuzzer>;
  let stored: unknown;
  const counts = new Map<string, number>();

  const must = async (res: Promise<ApiResponse>, status: number): Promise<any> => {
    const r = await res;
    expect(r.status, `fixture: ${r.text}`).to.equal(status);
    return r.json;
  };

  /** Everything stored that the fuzz run must leave as it was, read through the API. */
  async function snapshot(): Promise<unknown> {
    const out: Record<string, unknown> = {};
    await credentials.renewDue();
    for (const holder of ["alice", "carol"] as Holder[]) {
      const token = credentials.token(holder);
      const tenant = world.holders[holder].tenant;
      const fixtures = world.tenants[tenant]!;
      const payments = await api.listAll("/v1/payments", token);
      const users = await api.listAll(`/v1/tenants/${tenant}/users`, token);
      const docs = [];
      for (const d of fixtures.docs) {
        const res = await api.get(`/v1/docs/${d.id}`, { token });
        docs.push({ status: res.status, etag: res.headers.get("etag"), body: res.json });
      }
      const orders = [];
      for (const u of users) orders.push({ user: u.id, orders: await api.listAll(`/v1/users/${u.id}/orders`, token) });
      const refunds = [];
      for (const p of payments)
        refunds.push({ payment: p.id, refunds: await api.listAll(`/v1/payments/${p.id}/refunds`, token) });
      out[tenant] = { payments, refunds, users, orders, posts: await api.listAll("/v1/posts", token), docs };
    }
    const catalog = [];
    for (let page = 1; page < 100; page++) {
      const res = await api.get(`/v1/catalog/items?page=${page}&page_size=100`);
      expect(res.status, res.text).to.equal(200);
      catalog.push(...(res.json.items as unknown[]));
      if ((res.json.items as unknown[]).length < 100) break;
    }
    out.catalog = catalog;
    return out;
  }

  async function fixturesOf(holder: Holder, docIds: string[]): Promise<TenantFixtures> {
    const token = world.tokens[holder];
    const tenant = world.holders[holder].tenant;
    const users = await api.listAll(`/v1/tenants/${tenant}/users`, token);
    const payments = await api.listAll("/v1/payments", token);
    const orders = (await Promise.all(users.map((u) => api.listAll(`/v1/users/${u.id}/orders`, token)))).flat();
    const docs = [];
    for (const id of docIds) {
      const res = await api.get(`/v1/docs/${id}`, { token });
      expect(res.status, res.text).to.equal(200);
      docs.push({ id, etag: res.headers.get("etag")! });
    }
    return {
      userIds: users.map((u) => Number(u.id)),
      payments: await Promise.all(
        payments.map(async (p) => ({
          id: String(p.id),
          userId: p.user_id === null ? null : Number(p.user_id),
          refundIds: (await api.listAll(`/v1/payments/${p.id}/refunds`, token)).map((r) => String(r.id)),
        })),
      ),
      orders: orders.map((o) => ({
        id: Number(o.id),
        userId: Number(o.user_id),
        status: o.status,
        currency: String(o.currency),
        itemIds: (o.items as { id: number }[]).map((i) => Number(i.id)),
        discountIds: (o.discounts as { id: number }[]).map((d) => Number(d.id)),
        shipmentIds: (o.shipments as { id: string }[]).map((s) => String(s.id)),
      })),
      docs,
      posts: (await api.listAll("/v1/posts", token)).map((p) => String(p.id)),
      sessions: (Object.keys(world.holders) as Holder[])
        .filter((h) => world.holders[h].tenant === tenant)
        .map((h) => ({ id: String(jwtPayload(world.tokens[h]).sid), userId: world.holders[h].userId })),
    };
  }

  before(async function () {
    this.timeout(180_000);
    // Services shed calls while their event loop lags (503 LOAD_SHED): right under real overload,
    // noise on a busy test machine. This suite is about input handling, so shedding is off here.
    env = await startE2eMesh("fuzz", { env: { SHED_EVENT_LOOP_DELAY_MS: "0" } });
    api = env.api;
    port = Number(new URL(env.mesh.gatewayUrl).port);
    const [alice, bob, carol] = await Promise.all([api.login(ALICE), api.login(BOB), api.login(CAROL)]);
    const ids = new Map<string, number>();
    for (const [tenant, token] of [
      ["acme", alice],
      ["globex", carol],
    ] as const) {
      for (const u of await api.listAll(`/v1/tenants/${tenant}/users`, token)) ids.set(String(u.email), Number(u.id));
    }
    world = {
      tokens: { alice, bob, carol },
      holders: {
        alice: { tenant: "acme", role: "admin", userId: ids.get(ALICE.email)! },
        bob: { tenant: "acme", role: "member", userId: ids.get(BOB.email)! },
        carol: { tenant: "globex", role: "admin", userId: ids.get(CAROL.email)! },
      },
      tenants: {},
      catalog: new Map(),
      // scripts/mesh.ts: the demo mesh's catalog belongs to acme.
      catalogOwner: "acme",
    };
    credentials = new FuzzCredentials(api, { alice: ALICE, bob: BOB, carol: CAROL }, world.tokens);
    const catalog = await must(api.get("/v1/catalog/items?page_size=100"), 200);
    expect(catalog.total, "the whole catalog fits one page").to.be.at.most(100);
    world.catalog = new Map(
      (catalog.items as { sku: string; price: number; currency: string }[]).map((i) => [
        i.sku,
        { price: i.price, currency: i.currency },
      ]),
    );

    // Fixtures in both tenants: a refunded payment, a pending order with an item (priced from the
    // catalog) and a discount, a document and a post; in acme also bob's (a member's) own: a refunded
    // payment, a pending order, and an order he paid that alice shipped — so that hostile requests aim
    // at real data too, each holder at what is theirs and at what is not.
    const docIds: Record<string, string[]> = {};
    for (const [holder, token] of [
      ["alice", alice],
      ["carol", carol],
    ] as const) {
      const payment = await must(
        api.post("/v1/payments", {
          token,
          key: newKey(),
          json: { amount: 5_000, currency: "EUR", source: `tok_fuzz_${holder}` },
        }),
        201,
      );
      await must(
        api.post(`/v1/payments/${payment.id}/refunds`, {
          token,
          key: newKey(),
          json: { amount: 100, reason: "fuzz fixture" },
        }),
        201,
      );
      const order = await must(
        api.post("/v1/orders", {
          token,
          json: { currency: "EUR", items: [{ sku: "BOOK-1", quantity: 2, unit_price: 1_500 }], note: "fuzz fixture" },
        }),
        201,
      );
      await must(api.post(`/v1/orders/${order.id}/discounts`, { token, json: { code: "FUZZ10", amount: 100 } }), 201);
      const doc = await must(
        api.post("/v1/docs", { token, json: { title: "Fuzz fixture", body: "must not change" } }),
        201,
      );
      docIds[world.holders[holder].tenant] = [doc.id];
      await must(api.post("/v1/posts", { token, json: { title: "Fuzz fixture", body: `posted by ${holder}` } }), 201);
    }
    const bobsPayment = await must(
      api.post("/v1/payments", {
        token: bob,
        key: newKey(),
        json: { amount: 700, currency: "EUR", source: "tok_fuzz_bob" },
      }),
      201,
    );
    await must(
      api.post(`/v1/payments/${bobsPayment.id}/refunds`, {
        token: alice,
        key: newKey(),
        json: { amount: 50, reason: "fuzz fixture" },
      }),
      201,
    );
    await must(
      api.post("/v1/orders", {
        token: bob,
        json: { currency: "EUR", items: [{ sku: "PEN-1", quantity: 1 }], note: "bob's pending" },
      }),
      201,
    );
    const shipped = await must(
      api.post("/v1/orders", { token: bob, json: { currency: "EUR", items: [{ sku: "MUG-1", quantity: 1 }] } }),
      201,
    );
    await must(api.post(`/v1/orders/${shipped.id}/payment`, { token: bob, json: { source: "tok_visa" } }), 201);
    // Shipping is an admin's (bob would get 403 ROLE_REQUIRED).
    await must(
      api.post(`/v1/orders/${shipped.id}/shipments`, {
        token: alice,
        json: { carrier: "DHL", tracking_number: "FUZZ-1" },
      }),
      201,
    );

    world.tenants.acme = await fixturesOf("alice", docIds.acme!);
    world.tenants.globex = await fixturesOf("carol", docIds.globex!);
    fuzzer = createFuzzer({ model, world });
    stored = await snapshot();
    console.log(
      `      fuzz: seed ${SEED}, ${RUNS} requests, ${CONCURRENCY} at a time (replay: FUZZ_SEED=${SEED} FUZZ_RUNS=${RUNS})`,
    );
    const unmodelled = model.operations
      .filter((op) => !MODELLED_OPERATIONS.has(op.operationId))
      .map((op) => op.operationId);
    if (unmodelled.length > 0)
      console.log(
        `      fuzz: operations checked only loosely (add them to the oracle in test/fuzz/oracle.ts): ${unmodelled.join(", ")}`,
      );
  });

  after(async function () {
    this.timeout(60_000);
    const total = [...counts.values()].reduce((a, b) => a + b, 0);
    console.log(
      `      fuzz: ${total} requests sent (${[...counts].map(([k, v]) => `${k} ${v}`).join(", ")}), seed ${SEED}; ${credentials?.renewals ?? 0} tokens renewed`,
    );
    await env?.stop();
  });

  /** Every way the answer to one request can be wrong; undefined when it is right. */
  function problemWith(r: FuzzRequest, res: RawResponse): string | undefined {
    const body = res.body.toString("utf8");
    const fail = (why: string) =>
      `${why}\n    request: ${r[fc.toStringMethod]()}\n    answer: ${res.reset ? `none (${res.reset})` : `${res.status} ${JSON.stringify(res.headers).slice(0, 300)} ${body.slice(0, 300)}`}`;
    if (res.reset) return fail("no answer (the connection was closed, reset or timed out)");
    if (res.status >= 500) return fail(`a ${res.status}`);
    const outcomes = r.expectation.outcomes.filter((o) => o.status === res.status);
    if (outcomes.length === 0)
      return fail(`status ${res.status}, expected ${describeOutcomes(r.expectation.outcomes)}`);
    const head = r.raw.method === "HEAD";
    const contentType = res.headers["content-type"] ?? "";
    if (res.status >= 400) {
      if (!/^application\/json\b/.test(contentType))
        return fail(`an error without a JSON content type (${JSON.stringify(contentType)})`);
      if (!head) {
        let json: unknown;
        try {
          json = JSON.parse(body);
        } catch {
          return fail("an error body that is not JSON");
        }
        if (!json || typeof json !== "object" || Array.isArray(json))
          return fail("an error body that is not an object");
        // {error, code} exactly — plus `details`, of exactly its documented keys, for the codes that carry them.
        const envelope = errorEnvelopeProblem(json);
        if (envelope) return fail(envelope);
        const { code, details } = json as { code: string; details?: Record<string, unknown> };
        if (!model.errorCodes.has(code))
          return fail(`code ${JSON.stringify(code)} is not an ErrorCode of the document`);
        const codes = outcomes.every((o) => o.codes) ? new Set(outcomes.flatMap((o) => o.codes!)) : undefined;
        if (codes && !codes.has(code)) return fail(`code ${code}, expected ${[...codes].join(" or ")}`);
        // Where the request settles the facts (the sku refused, the catalog's price), they are those.
        const withCode = outcomes.filter((o) => !o.codes || o.codes.includes(code));
        if (withCode.length > 0 && withCode.every((o) => o.details)) {
          const same = (o: Outcome) =>
            JSON.stringify(Object.entries(o.details!).sort()) === JSON.stringify(Object.entries(details ?? {}).sort());
          if (!withCode.some(same))
            return fail(
              `details ${JSON.stringify(details)}, expected ${withCode.map((o) => JSON.stringify(o.details)).join(" or ")}`,
            );
        }
      }
    } else if ((res.status === 200 || res.status === 201) && !head) {
      if (/^text\/event-stream\b/.test(contentType)) {
        // The live feed: its header block is all there is to check.
      } else if (!/^application\/json\b/.test(contentType)) return fail(`a ${res.status} without a JSON content type`);
      else {
        try {
          JSON.parse(body);
        } catch {
          return fail(`a ${res.status} whose body is not JSON`);
        }
      }
    }
    if (res.status === 405) {
      const allow = (res.headers.allow ?? "")
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean)
        .sort();
      const expected = [...(outcomes[0]?.allow ?? [])].sort();
      if (allow.length === 0) return fail("a 405 without Allow");
      if (expected.length > 0 && allow.join(",") !== expected.join(","))
        return fail(`Allow ${allow.join(", ")}, expected ${expected.join(", ")}`);
    }
    if (res.status === 401 && !/^Bearer\b/.test(res.headers["www-authenticate"] ?? ""))
      return fail("a 401 without WWW-Authenticate: Bearer");
    // Every answer of the gateway itself carries the quota (node's own answers to broken HTTP cannot).
    if (!outcomes.every((o) => o.bare) && res.headers["x-ratelimit-limit"] === undefined)
      return fail("no X-RateLimit-Limit");
    return undefined;
  }

  async function fuzz(name: PropertyName, arbitrary: fc.Arbitrary<FuzzRequest>, share: number): Promise<void> {
    const numRuns = Math.max(1, Math.ceil((RUNS * share) / AVERAGE_BATCH));
    const statuses = new Map<number, number>();
    const started = performance.now();
    let sent = 0;
    let credentialed = 0;
    try {
      await fc.assert(
        fc.asyncProperty(fuzzer.batch(arbitrary, CONCURRENCY), async (batch) => {
          await credentials.renewDue();
          const answers = await Promise.all(
            batch.map((r) => send(port, credentials.onWire(r.raw), { timeoutMs: REQUEST_TIMEOUT_MS })),
          );
          sent += batch.length;
          credentialed += batch.filter(
            (r) => holderOf(world, nodeHeaders(r.raw.headers).authorization) !== undefined,
          ).length;
          const problems: string[] = [];
          batch.forEach((r, i) => {
            const res = answers[i]!;
            statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
            const problem = problemWith(r, res);
            if (problem) problems.push(problem);
          });
          if (problems.length > 0) throw new Error(problems.join("\n  "));
        }),
        { seed: SEED, numRuns },
      );
    } finally {
      counts.set(name, sent);
      const histogram = [...statuses]
        .sort(([a], [b]) => a - b)
        .map(([s, n]) => `${s}×${n}`)
        .join(" ");
      const share = sent === 0 ? 0 : Math.round((100 * credentialed) / sent);
      console.log(
        `      fuzz ${name}: ${numRuns} runs, ${sent} requests (${share}% with a valid credential) in ${((performance.now() - started) / 1000).toFixed(1)} s — statuses ${histogram}`,
      );
    }
  }

  for (const p of PROPERTIES) {
    it(`answers ${p.title} with the documented 4xx, never a 5xx`, async () => {
      const arbitrary = {
        bodies: fuzzer.bodyRequest,
        paths: fuzzer.pathRequest,
        headers: fuzzer.headerRequest,
        protocol: fuzzer.protocolRequest,
      }[p.name];
      await fuzz(p.name, arbitrary, p.share);
    });
  }

  it("afterwards: every process runs, /readyz is 200, the stored data is unchanged and no request failed inside", async () => {
    for (const name of MESH_PROCESSES)
      expect(env.mesh.process(name).exitCode, `${name} is still running`).to.equal(null);
    const ready = await fetch(`${env.mesh.gatewayUrl}/readyz`);
    expect(ready.status, "GET /readyz").to.equal(200);
    expect(await snapshot(), "the stored data changed").to.deep.equal(stored);
    // What the processes logged: no error, and no request the gateway answered (or meant to answer) with a 5xx.
    const failures = env.mesh.logs
      .join("")
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => {
        try {
          return JSON.parse(l) as { level?: string; status?: number; msg?: string };
        } catch {
          return {};
        }
      })
      .filter((e) => e.level === "error" || e.level === "fatal" || (typeof e.status === "number" && e.status >= 500))
      .map((e) => JSON.stringify(e).slice(0, 600));
    expect(failures, `failures in the logs:\n${failures.slice(0, 10).join("\n")}`).to.deep.equal([]);
  });
});
