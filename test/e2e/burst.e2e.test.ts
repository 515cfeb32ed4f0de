// No shedding without overload (issues 15 and 34), through the real mesh with the gateway's DEFAULT
// adaptive concurrency limit (startE2eMesh pins a limit far above any load; here the defaults are
// given back explicitly): a burst of 64 concurrent requests right after start is admitted, and so are
// bursts all through the time the limit used to re-measure the latency without a queue at its
// minimum (at start, ~5 s later, then every minute) — with the probe interval shortened so that
// several pass; and closed-loop clients of a mixed load (4, 16, 64 connections), each sending its
// next request as the last is answered, are never shed, however long they wait behind each other.
import { expect } from "chai";
import { ALICE, newKey, startE2eMesh, type E2eMesh } from "../support/http.js";

/** The defaults of GATEWAY_CONCURRENCY_INITIAL / MIN / MAX (docs/configuration.md). */
const DEFAULT_LIMIT = {
  GATEWAY_CONCURRENCY_INITIAL: "100",
  GATEWAY_CONCURRENCY_MIN: "3",
  GATEWAY_CONCURRENCY_MAX: "1000",
};
const PROBE_INTERVAL_MS = 1_000;
const BURST = 64;

describe("e2e: bursts on the default adaptive concurrency limit", function () {
  this.timeout(120_000);
  let env: E2eMesh;

  before(async () => {
    env = await startE2eMesh("burst", {
      envFor: { gateway: { ...DEFAULT_LIMIT, GATEWAY_CONCURRENCY_PROBE_INTERVAL_MS: String(PROBE_INTERVAL_MS) } },
    });
  });
  after(async () => env?.stop());

  /** BURST concurrent GET /v1/catalog/items (public); the statuses that were not 200, counted. */
  async function burst(): Promise<Record<number, number>> {
    const responses = await Promise.all(Array.from({ length: BURST }, () => env.api.get("/v1/catalog/items")));
    const other: Record<number, number> = {};
    for (const res of responses) if (res.status !== 200) other[res.status] = (other[res.status] ?? 0) + 1;
    return other;
  }

  /** One request at a time for `ms`: light traffic, each one answered. */
  async function light(ms: number): Promise<void> {
    const until = performance.now() + ms;
    while (performance.now() < until) {
      const res = await env.api.get("/v1/catalog/items");
      expect(res.status, res.text).to.equal(200);
    }
  }

  it("admits a burst of 64 right after start: no 503", async () => {
    expect(await burst(), "answers other than 200").to.deep.equal({});
  });

  it("admits bursts of 64 all through what used to be the re-measurements, and past several probe intervals: no 503", async () => {
    const started = performance.now();
    const refused: string[] = [];
    let bursts = 0;
    // Light traffic with a burst every second and a half or so, for longer than the old first re-measurement
    // (~5 s after start) and several probe intervals.
    while (bursts < 6 || performance.now() - started < Math.max(8_000, 6 * PROBE_INTERVAL_MS)) {
      await light(1_500);
      const at = ((performance.now() - started) / 1_000).toFixed(1);
      const other = await burst();
      bursts++;
      if (Object.keys(other).length > 0) refused.push(`${at} s: ${JSON.stringify(other)}`);
    }
    expect(refused, `bursts (of ${bursts}) with answers other than 200`).to.deep.equal([]);
  });

  it("never sheds closed-loop clients of a mixed load: 4, 16 and 64 connections, one after another without a pause", async function () {
    this.timeout(120_000);
    const token = await env.api.login(ALICE);
    const paid = await env.api.post("/v1/payments", {
      token,
      key: newKey(),
      json: { amount: 1_250, currency: "EUR", source: "tok_closed_loop" },
    });
    expect(paid.status, paid.text).to.equal(201);
    // The mix: 60 % reads of a payment, 20 % catalog pages, 10 % lists, 10 % new payments.
    const mix = (i: number) => {
      const k = i % 10;
      if (k < 6) return env.api.get(`/v1/payments/${paid.json.id}`, { token });
      if (k < 8) return env.api.get(`/v1/catalog/items?page=${1 + (i % 3)}`);
      if (k < 9) return env.api.get("/v1/payments?limit=20", { token });
      return env.api.post("/v1/payments", {
        token,
        key: newKey(),
        json: { amount: 100 + (i % 50), currency: "EUR", source: "tok_closed_loop" },
      });
    };
    const statuses: Record<string, Record<number, number>> = {};
    for (const connections of [4, 16, 64]) {
      const seen: Record<number, number> = {};
      const until = performance.now() + 4_000;
      let sent = 0;
      await Promise.all(
        Array.from({ length: connections }, async () => {
          while (performance.now() < until) {
            const res = await mix(sent++);
            seen[res.status] = (seen[res.status] ?? 0) + 1;
          }
        }),
      );
      statuses[connections] = seen;
    }
    for (const [connections, seen] of Object.entries(statuses)) {
      const other = Object.entries(seen).filter(([status]) => status !== "200" && status !== "201");
      expect(other, `${connections} connections: ${JSON.stringify(seen)}`).to.deep.equal([]);
    }
  });
});
