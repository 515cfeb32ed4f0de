// End to end through the real mesh: catalog imports as queued work. POST /v1/catalog/imports answers
// 202 + Location at once; GET of the job shows it run to `succeeded` in the content service (through
// ImportItems' implementation), with counts and per-line errors; the items are then in the public
// catalog. JSON arrays and NDJSON bodies, the Idempotency-Key (replay: 202, same Location), bodies that
// are no list of items (4xx at once, nothing queued), who may import and read, and a job that outlives
// a restart of the gateway (its state is content's) and of content itself.
import { expect } from "chai";
import { setTimeout as sleep } from "node:timers/promises";
import {
  ALICE,
  BOB,
  CAROL,
  expectError,
  expectUnauthenticated,
  newKey,
  startE2eMesh,
  unique,
  untilReachable,
  type Api,
  type ApiResponse,
  type E2eMesh,
} from "../support/http.js";

const JOB_KEYS = ["counts", "created_at", "errors", "failure", "id", "status", "updated_at"];
const JOB_LOCATION = /^\/v1\/catalog\/imports\/(imp_[A-Za-z0-9_-]{20})$/;
const NDJSON = { "content-type": "application/x-ndjson" };

interface JobJson {
  id: string;
  status: "queued" | "running" | "succeeded" | "failed";
  counts: { received: number; imported: number; failed: number };
  errors: { line: number; code: string; message: string }[];
  failure: string | null;
  created_at: string;
  updated_at: string;
}

describe("e2e: catalog imports — 202 + Location, a job run by the content service", function () {
  this.timeout(60_000);
  let env: E2eMesh;
  let api: Api;
  let alice: string;
  let bob: string;
  let carol: string;

  before(async function () {
    this.timeout(120_000);
    env = await startE2eMesh("imports");
    api = env.api;
    [alice, bob, carol] = await Promise.all([api.login(ALICE), api.login(BOB), api.login(CAROL)]);
  });
  after(async function () {
    this.timeout(60_000);
    await env?.stop();
  });

  const item = (sku: string, price: number, name = `Imported ${sku}`) => ({ sku, name, price, currency: "EUR" });
  const ndjson = (...lines: unknown[]) => lines.map((l) => (typeof l === "string" ? l : JSON.stringify(l))).join("\n");

  /** The 202 of a new import: Location of the job, the job queued. */
  function expectAccepted(res: ApiResponse, received: number): JobJson {
    expect(res.status, res.text).to.equal(202);
    const location = res.headers.get("location") ?? "";
    const m = JOB_LOCATION.exec(location);
    expect(m, `Location ${location}`).to.not.equal(null);
    expect(res.headers.get("content-type")).to.match(/^application\/json\b/);
    const job = res.json as JobJson;
    expect(Object.keys(job).sort()).to.deep.equal(JOB_KEYS);
    expect(job.id).to.equal(m![1]);
    expect(job.status, "answered before it runs").to.equal("queued");
    expect(job.counts).to.deep.equal({ received, imported: 0, failed: 0 });
    expect(job.errors).to.deep.equal([]);
    expect(job.failure).to.equal(null);
    return job;
  }

  /** GETs the job until it is finished. */
  async function finished(location: string, token = alice): Promise<JobJson> {
    for (const until = Date.now() + 30_000; Date.now() < until; await sleep(100)) {
      const res = await api.get(location, { token });
      expect(res.status, res.text).to.equal(200);
      expect(Object.keys(res.json).sort()).to.deep.equal(JOB_KEYS);
      if (res.json.status === "succeeded" || res.json.status === "failed") return res.json as JobJson;
      expect(res.json.status).to.be.oneOf(["queued", "running"]);
    }
    throw new Error(`${location} did not finish within 30 s`);
  }

  /** Every item of the public catalog, by sku (its pages walked). */
  async function catalog(): Promise<Map<string, { name: string; price: number; currency: string }>> {
    const all = new Map<string, { name: string; price: number; currency: string }>();
    for (let page = 1; ; page++) {
      const res = await api.get(`/v1/catalog/items?page=${page}&page_size=100`);
      expect(res.status, res.text).to.equal(200);
      for (const i of res.json.items) all.set(i.sku, { name: i.name, price: i.price, currency: i.currency });
      if (page * 100 >= res.json.total) return all;
    }
  }

  it("answers a JSON array with 202 + Location at once; the job then succeeds with counts and per-line errors, and the items are in the catalog", async () => {
    const sku = `JSON-${unique()}`;
    const body = [
      item(`${sku}-A`, 1_250, "Lamp"),
      item("PEN-1", 2_700, "Fountain pen"), // replaces a demo item
      { sku: `${sku}-B`, name: "Price as text", price: "12", currency: "EUR" }, // wrong type → INVALID_REQUEST
      item(`${sku}-C`, -5), // breaks the document's rule → RULE_VIOLATION (the gateway's)
      17, // not an item at all
      { ...item(`${sku}-D`, 5), colour: "red" }, // unknown field
      item(`${sku}-E`, 5, "   "), // a blank name → RULE_VIOLATION (content's, in ImportItems)
      { ...item(`${sku}-F`, 5), currency: "XXY" }, // not ISO 4217 → RULE_VIOLATION (content's)
    ];
    const res = await api.post("/v1/catalog/imports", { token: alice, key: newKey(), json: body });
    const job = expectAccepted(res, 8);
    const done = await finished(res.headers.get("location")!);
    expect(done.id).to.equal(job.id);
    expect(done.status).to.equal("succeeded");
    expect(done.failure).to.equal(null);
    expect(done.counts).to.deep.equal({ received: 8, imported: 2, failed: 6 });
    expect(done.errors.map((e) => [e.line, e.code])).to.deep.equal([
      [3, "INVALID_REQUEST"],
      [4, "RULE_VIOLATION"],
      [5, "INVALID_REQUEST"],
      [6, "INVALID_REQUEST"],
      [7, "RULE_VIOLATION"],
      [8, "RULE_VIOLATION"],
    ]);
    expect(done.errors[0]!.message).to.equal("price must be of type integer");
    expect(done.errors[1]!.message).to.equal("price must be >= 0");
    expect(done.errors[2]!.message).to.equal("item must be of type object");
    expect(done.errors[3]!.message).to.equal("unknown field colour");
    expect(done.errors[4]!.message).to.match(/^name must be/);
    expect(done.errors[5]!.message).to.match(/^currency must be/);
    for (const e of done.errors) expect(e.message).to.be.a("string").and.not.equal("");
    expect(Date.parse(done.updated_at)).to.be.at.least(Date.parse(done.created_at));
    const items = await catalog();
    expect(items.get(`${sku}-A`)).to.deep.equal({ name: "Lamp", price: 1_250, currency: "EUR" });
    expect(items.get("PEN-1")).to.deep.equal({ name: "Fountain pen", price: 2_700, currency: "EUR" });
    for (const bad of ["B", "C", "D", "E", "F"])
      expect(items.has(`${sku}-${bad}`), `${sku}-${bad} refused`).to.equal(false);
  });

  it("takes NDJSON: one item per line, line numbers as sent (blank lines counted, CRLF), a line that is no JSON a per-line error", async () => {
    const sku = `ND-${unique()}`;
    const text = [
      JSON.stringify(item(`${sku}-1`, 100)),
      "",
      JSON.stringify(item(`${sku}-3`, 300)) + "\r",
      "{not json",
      "   ",
      JSON.stringify({ sku: `${sku}-6` }),
      JSON.stringify(item(`${sku}-7`, 700)),
      "",
    ].join("\n");
    const res = await api.post("/v1/catalog/imports", { token: alice, key: newKey(), raw: text, headers: NDJSON });
    expectAccepted(res, 5);
    const done = await finished(res.headers.get("location")!);
    expect([done.status, done.counts]).to.deep.equal(["succeeded", { received: 5, imported: 3, failed: 2 }]);
    expect(done.errors).to.deep.equal([
      { line: 4, code: "INVALID_REQUEST", message: "the line is not a JSON value" },
      { line: 6, code: "INVALID_REQUEST", message: "name is required" },
    ]);
    const items = await catalog();
    expect([1, 3, 7].map((n) => items.get(`${sku}-${n}`)?.price)).to.deep.equal([100, 300, 700]);
    // A charset other than UTF-8 is another media type.
    expectError(
      await api.post("/v1/catalog/imports", {
        token: alice,
        key: newKey(),
        raw: text,
        headers: { "content-type": "application/x-ndjson; charset=latin1" },
      }),
      415,
      "UNSUPPORTED_MEDIA_TYPE",
    );
  });

  it("makes one job per Idempotency-Key: a retry answers 202 with the same Location and Idempotent-Replayed, another body 422", async () => {
    const key = newKey();
    const sku = `IDEM-${unique()}`;
    const body = [item(`${sku}-1`, 10), item(`${sku}-2`, 20)];
    const first = await api.post("/v1/catalog/imports", { token: alice, key, json: body });
    expectAccepted(first, 2);
    expect(first.headers.get("idempotent-replayed")).to.equal(null);
    const location = first.headers.get("location")!;
    const done = await finished(location);
    const again = await api.post("/v1/catalog/imports", { token: alice, key, json: body });
    expect(again.status, again.text).to.equal(202);
    expect(again.headers.get("location")).to.equal(location);
    expect(again.headers.get("idempotent-replayed")).to.equal("true");
    expect(again.json, "the same job, as it is now").to.deep.equal(done);
    // The same items as NDJSON are the same lines: the same job.
    const asNdjson = await api.post("/v1/catalog/imports", {
      token: alice,
      key,
      raw: ndjson(...body),
      headers: NDJSON,
    });
    expect([
      asNdjson.status,
      asNdjson.headers.get("location"),
      asNdjson.headers.get("idempotent-replayed"),
    ]).to.deep.equal([202, location, "true"]);
    expectError(
      await api.post("/v1/catalog/imports", { token: alice, key, json: [item(`${sku}-1`, 11), item(`${sku}-2`, 20)] }),
      422,
      "IDEMPOTENCY_KEY_REUSED",
    );
    expectError(await api.post("/v1/catalog/imports", { token: alice, json: body }), 400, "INVALID_REQUEST");
    expectError(
      await api.post("/v1/catalog/imports", { token: alice, key: "not-a-uuid", json: body }),
      400,
      "INVALID_REQUEST",
    );
    expect((await catalog()).get(`${sku}-1`)?.price, "imported once, by the first request").to.equal(10);
  });

  it("refuses at once, with a JSON error, a body that is no list of items — and queues nothing", async () => {
    const before = await catalog();
    const sent = async (options: { json?: unknown; raw?: string | Buffer; headers?: Record<string, string> }) =>
      api.post("/v1/catalog/imports", { token: alice, key: newKey(), ...options });
    const cases: [string, Promise<ApiResponse>, number, string][] = [
      ["a JSON object", sent({ json: { items: [item("OBJ-1", 1)] } }), 400, "INVALID_REQUEST"],
      ["a JSON string", sent({ json: "BOOK-1" }), 400, "INVALID_REQUEST"],
      ["null", sent({ raw: "null", headers: { "content-type": "application/json" } }), 400, "INVALID_REQUEST"],
      ["an empty array", sent({ json: [] }), 422, "RULE_VIOLATION"],
      ["10001 items", sent({ json: Array.from({ length: 10_001 }, () => 0) }), 422, "RULE_VIOLATION"],
      ["no JSON", sent({ raw: "[{", headers: { "content-type": "application/json" } }), 400, "INVALID_REQUEST"],
      [
        "an empty JSON body",
        sent({ raw: "", headers: { "content-type": "application/json" } }),
        400,
        "INVALID_REQUEST",
      ],
      ["an empty NDJSON body", sent({ raw: "", headers: NDJSON }), 400, "INVALID_REQUEST"],
      ["only blank lines", sent({ raw: "\n \r\n\t\n", headers: NDJSON }), 400, "INVALID_REQUEST"],
      ["CSV sent as NDJSON", sent({ raw: "sku,name,price\nX-1,Thing,100\n", headers: NDJSON }), 400, "INVALID_REQUEST"],
      [
        "a pretty-printed JSON array sent as NDJSON",
        sent({ raw: JSON.stringify([item("PP-1", 1)], null, 2), headers: NDJSON }),
        400,
        "INVALID_REQUEST",
      ],
      [
        "invalid UTF-8",
        sent({
          raw: Buffer.concat([Buffer.from('{"sku":"X'), Buffer.from([0xff]), Buffer.from('"}')]),
          headers: NDJSON,
        }),
        400,
        "INVALID_REQUEST",
      ],
      ["text/csv", sent({ raw: "sku,name\n", headers: { "content-type": "text/csv" } }), 415, "UNSUPPORTED_MEDIA_TYPE"],
      ["no content type", sent({ raw: "[]" }), 415, "UNSUPPORTED_MEDIA_TYPE"],
      [
        "more than 64 KiB",
        sent({ raw: ndjson(...Array.from({ length: 1_200 }, (_, i) => item(`BIG-${i}`, i))), headers: NDJSON }),
        413,
        "PAYLOAD_TOO_LARGE",
      ],
    ];
    for (const [what, res, status, code] of cases) {
      const answer = await res;
      expect(answer.status, `${what}: ${answer.text}`).to.equal(status);
      expectError(answer, status, code);
    }
    // NDJSON is this operation's alone.
    expectError(
      await api.post("/v1/docs", { token: alice, raw: JSON.stringify({ title: "t", body: "b" }), headers: NDJSON }),
      415,
      "UNSUPPORTED_MEDIA_TYPE",
    );
    await sleep(500);
    expect([...(await catalog()).keys()].sort(), "nothing was imported").to.deep.equal([...before.keys()].sort());
  });

  it("lets only the catalog owner's admins import (403 otherwise, 401 without a token), and only the tenant's admins read a job (404 for another tenant)", async () => {
    const body = [item(`WHO-${unique()}`, 1)];
    expectError(await api.post("/v1/catalog/imports", { token: bob, key: newKey(), json: body }), 403, "ROLE_REQUIRED");
    expectError(
      await api.post("/v1/catalog/imports", { token: carol, key: newKey(), json: body }),
      403,
      "TENANT_MISMATCH",
    );
    expectUnauthenticated(await api.post("/v1/catalog/imports", { key: newKey(), json: body }));
    expect((await catalog()).has(body[0]!.sku), "the refused imports imported nothing").to.equal(false);
    const res = await api.post("/v1/catalog/imports", { token: alice, key: newKey(), json: body });
    const job = expectAccepted(res, 1);
    const location = res.headers.get("location")!;
    await finished(location);
    expectError(await api.get(location, { token: bob }), 403, "ROLE_REQUIRED");
    const forCarol = await api.get(location, { token: carol });
    expectError(forCarol, 404, "NOT_FOUND");
    expect(forCarol.text).to.not.include(job.id);
    expectUnauthenticated(await api.get(location));
    expectError(await api.get("/v1/catalog/imports/imp_AAAAAAAAAAAAAAAAAAAA", { token: alice }), 404, "NOT_FOUND");
    expectError(await api.get("/v1/catalog/imports/nothing-here", { token: alice }), 404, "NOT_FOUND");
  });

  it("is the same at /v2: Location on the path asked on, the job readable on both versions' paths", async () => {
    const res = await api.post("/v2/catalog/imports", {
      token: alice,
      key: newKey(),
      json: [item(`V2-${unique()}`, 1)],
    });
    expect(res.status, res.text).to.equal(202);
    const location = res.headers.get("location") ?? "";
    expect(location).to.equal(`/v2/catalog/imports/${res.json.id}`);
    const done = await finished(location);
    expect(done.status).to.equal("succeeded");
    expect((await api.get(`/v1/catalog/imports/${res.json.id}`, { token: alice })).json).to.deep.equal(done);
  });

  it("keeps a job across a gateway restart between POST and GET: found, and finished, by the new gateway", async function () {
    this.timeout(120_000);
    const sku = `RESTART-${unique()}`;
    const key = newKey();
    const text = ndjson(...Array.from({ length: 400 }, (_, i) => item(`${sku}-${i}`, i + 1)));
    const res = await api.post("/v1/catalog/imports", { token: alice, key, raw: text, headers: NDJSON });
    expectAccepted(res, 400);
    const location = res.headers.get("location")!;
    await env.mesh.restartService("gateway");
    const done = await finished(location);
    expect([done.status, done.counts]).to.deep.equal(["succeeded", { received: 400, imported: 400, failed: 0 }]);
    // The new gateway also knows the key: it is content's, not the gateway's.
    const again = await api.post("/v1/catalog/imports", { token: alice, key, raw: text, headers: NDJSON });
    expect([again.status, again.headers.get("location"), again.headers.get("idempotent-replayed")]).to.deep.equal([
      202,
      location,
      "true",
    ]);
    const items = await catalog();
    expect(Array.from({ length: 400 }, (_, i) => items.get(`${sku}-${i}`)?.price)).to.deep.equal(
      Array.from({ length: 400 }, (_, i) => i + 1),
    );
  });

  it("finishes a job whose content process is restarted while it is queued or running: every line imported once", async function () {
    this.timeout(120_000);
    const sku = `CONTENT-${unique()}`;
    const res = await api.post("/v1/catalog/imports", {
      token: alice,
      key: newKey(),
      raw: ndjson(...Array.from({ length: 400 }, (_, i) => item(`${sku}-${i}`, 7))),
      headers: NDJSON,
    });
    expectAccepted(res, 400);
    await env.mesh.restartService("content");
    const location = res.headers.get("location")!;
    await untilReachable(() => api.get(location, { token: alice }));
    const done = await finished(location);
    expect([done.status, done.counts]).to.deep.equal(["succeeded", { received: 400, imported: 400, failed: 0 }]);
    const items = await catalog();
    expect(Array.from({ length: 400 }, (_, i) => items.has(`${sku}-${i}`)).every(Boolean)).to.equal(true);
  });
});
