// Priority under a flood (issue 46), through the real mesh with an adaptive limit small enough for a
// test to overload: pages of the payments list past the first (sheddable), asked by many clients
// under several users' tokens at once, beside critical writers creating payments. The gateway sheds
// the flood and not one critical request; a client's own x-switchyard-priority raises nothing.
import { expect } from "chai";
import { ALICE, BOB, newKey, startE2eMesh, type E2eMesh } from "../support/http.js";

/** A small adaptive limit: overload begins at 16 in flight (the limit and the backlog beyond it). */
const SMALL_LIMIT = {
  GATEWAY_CONCURRENCY_INITIAL: "8",
  GATEWAY_CONCURRENCY_MIN: "3",
  GATEWAY_CONCURRENCY_MAX: "1000",
};
/** Sheddable requests kept in flight at once, each sent again as soon as it is answered. */
const FLOOD = 120;
const WRITERS = 3;
const FLOOD_MS = 4_000;
const PAYMENT = { amount: 1_250, currency: "EUR", source: "tok_priority" };

describe("e2e: the gateway sheds by priority", function () {
  this.timeout(120_000);
  let env: E2eMesh;

  before(async () => {
    env = await startE2eMesh("priority", { envFor: { gateway: SMALL_LIMIT } });
  });
  after(async () => env?.stop());

  /** switchyard_gateway_shed_total by priority. */
  async function gatewaySheds(): Promise<Record<string, number>> {
    const text = await (await fetch(`${env.mesh.gatewayUrl}/metrics`)).text();
    const shed: Record<string, number> = {};
    for (const m of text.matchAll(/^switchyard_gateway_shed_total\{[^}]*priority="(\w+)"[^}]*\} (\d+)/gm))
      shed[m[1]!] = Number(m[2]);
    return shed;
  }

  it("a flood of sheddable pages from several users is shed; every critical payment beside it is created", async () => {
    const tokens = [await env.api.login(ALICE), await env.api.login(BOB)];
    // Each user's own second page: a cursor is its caller's alone.
    const cursors: string[] = [];
    for (const token of tokens) {
      for (let i = 0; i < 8; i++) {
        const res = await env.api.post("/v1/payments", { token, key: newKey(), json: PAYMENT });
        expect(res.status, res.text).to.equal(201);
      }
      const first = await env.api.get("/v1/payments?limit=5", { token });
      cursors.push(encodeURIComponent(String(first.json.next_cursor)));
    }
    const pageOf = (i: number) =>
      fetch(`${env.mesh.gatewayUrl}/v1/payments?limit=5&cursor=${cursors[i % tokens.length]!}`, {
        // A page past the first is sheddable; the client's own claim to be critical changes nothing.
        headers: { authorization: `Bearer ${tokens[i % tokens.length]!}`, "x-switchyard-priority": "critical" },
      });

    const until = performance.now() + FLOOD_MS;
    const flood: Record<number, number> = {};
    const critical: Record<number, number> = {};
    const flooding = Array.from({ length: FLOOD }, async (_, i) => {
      while (performance.now() < until) {
        const res = await pageOf(i);
        await res.arrayBuffer();
        flood[res.status] = (flood[res.status] ?? 0) + 1;
      }
    });
    const writing = Array.from({ length: WRITERS }, async (_, i) => {
      while (performance.now() < until) {
        const res = await env.api.post("/v1/payments", {
          token: tokens[i % tokens.length]!,
          key: newKey(),
          json: PAYMENT,
        });
        critical[res.status] = (critical[res.status] ?? 0) + 1;
      }
    });
    await Promise.all([...flooding, ...writing]);

    const writes = Object.values(critical).reduce((a, b) => a + b, 0);
    expect(writes, "critical writes were made throughout").to.be.greaterThan(WRITERS);
    expect(critical, "every critical write answered 201").to.deep.equal({ 201: writes });
    expect(Object.keys(flood), `the flood is answered or shed: ${JSON.stringify(flood)}`).to.have.members([
      "200",
      "503",
    ]);
    const sheds = await gatewaySheds();
    expect(sheds.sheddable ?? 0, "shed at the gateway as sheddable").to.be.greaterThan(0);
    expect(sheds.critical ?? 0, "no critical request shed at the gateway").to.equal(0);
  });
});
