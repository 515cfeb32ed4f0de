// The edge cache's memory (bounds, LRU, groups, fills racing changes) and the lease rule that lets it
// answer (a fake clock): measured from the renewal's sending, void for an earlier subscription, and
// never before the required position is applied.
import { expect } from "chai";
import { CATALOG_GROUP, documentGroup, EdgeCache, type CachedAnswer } from "../src/runtime/edge-cache.js";
import { CacheLease } from "../src/runtime/cache-lease.js";

const answer = (text: string, etag?: string): CachedAnswer => ({
  status: 200,
  headers: etag ? { etag } : {},
  body: Buffer.from(JSON.stringify({ text })),
  ...(etag ? { etag } : {}),
});
const textOf = (a: CachedAnswer | undefined) =>
  a ? (JSON.parse(a.body.toString()) as { text: string }).text : undefined;

describe("edge cache: memory", () => {
  const open = (limits = { maxEntries: 100, maxBytes: 1 << 20 }) => {
    let serving = true;
    const cache = new EdgeCache(limits, () => serving);
    return { cache, stopServing: () => (serving = false) };
  };

  it("answers what was filled, and nothing while it may not serve", () => {
    const { cache, stopServing } = open();
    expect(cache.fill(cache.ticket(CATALOG_GROUP), "p1", answer("one"))).to.equal(true);
    expect(textOf(cache.lookup("p1"))).to.equal("one");
    stopServing();
    expect(cache.lookup("p1")).to.equal(undefined);
    expect(cache.active).to.equal(false);
  });

  it("drops every catalog page on a catalog change, and only the named document on a document change", () => {
    const { cache } = open();
    cache.fill(cache.ticket(CATALOG_GROUP), "p1", answer("one"));
    cache.fill(cache.ticket(CATALOG_GROUP), "p2", answer("two"));
    cache.fill(cache.ticket(documentGroup("acme", "doc_a")), "a:v1", answer("a1"));
    cache.fill(cache.ticket(documentGroup("acme", "doc_a")), "a:v2", answer("a2"));
    cache.fill(cache.ticket(documentGroup("acme", "doc_b")), "b:v1", answer("b1"));
    cache.fill(cache.ticket(documentGroup("globex", "doc_a")), "ga:v1", answer("ga"));
    cache.drop(documentGroup("acme", "doc_a"));
    expect([cache.lookup("a:v1"), cache.lookup("a:v2")]).to.deep.equal([undefined, undefined]);
    expect([textOf(cache.lookup("b:v1")), textOf(cache.lookup("ga:v1")), textOf(cache.lookup("p1"))]).to.deep.equal([
      "b1",
      "ga",
      "one",
    ]);
    cache.drop(CATALOG_GROUP);
    expect([cache.lookup("p1"), cache.lookup("p2")]).to.deep.equal([undefined, undefined]);
    expect(textOf(cache.lookup("b:v1"))).to.equal("b1");
  });

  it("keeps no fill whose read may predate a change of its group or a clear", () => {
    const { cache } = open();
    const before = cache.ticket(CATALOG_GROUP);
    const otherGroup = cache.ticket(documentGroup("acme", "doc_a"));
    cache.drop(CATALOG_GROUP); // the change is applied while the read is on its way
    expect(cache.fill(before, "p1", answer("old"))).to.equal(false);
    expect(cache.lookup("p1")).to.equal(undefined);
    // A change of another group leaves the fill alone.
    expect(cache.fill(otherGroup, "a", answer("a"))).to.equal(true);
    const afterDrop = cache.ticket(CATALOG_GROUP);
    expect(cache.fill(afterDrop, "p1", answer("new"))).to.equal(true);
    const beforeClear = cache.ticket(documentGroup("acme", "doc_b"));
    cache.clear();
    expect(cache.fill(beforeClear, "b", answer("b"))).to.equal(false);
    expect(cache.size).to.equal(0);
  });

  it("refuses a fill ticketed before drops it can no longer tell apart", () => {
    const { cache } = open();
    const old = cache.ticket(documentGroup("acme", "doc_z"));
    for (let i = 0; i < 10_001; i++) cache.drop(documentGroup("acme", `doc_${i}`));
    expect(cache.fill(old, "z", answer("z"))).to.equal(false);
    expect(cache.fill(cache.ticket(documentGroup("acme", "doc_z")), "z", answer("z"))).to.equal(true);
  });

  it("holds at most its entries and bytes, the least recently used out first", () => {
    const { cache } = open({ maxEntries: 3, maxBytes: 1 << 20 });
    for (const k of ["a", "b", "c"]) cache.fill(cache.ticket(CATALOG_GROUP), k, answer(k));
    cache.lookup("a"); // a is now the most recently used
    cache.fill(cache.ticket(CATALOG_GROUP), "d", answer("d"));
    expect([
      textOf(cache.lookup("a")),
      cache.lookup("b"),
      textOf(cache.lookup("c")),
      textOf(cache.lookup("d")),
    ]).to.deep.equal(["a", undefined, "c", "d"]);
    const small = open({ maxEntries: 100, maxBytes: 3 * (256 + 20) }).cache;
    for (const k of ["k1", "k2", "k3", "k4"]) small.fill(small.ticket(CATALOG_GROUP), k, answer("x".repeat(8)));
    expect(small.size).to.be.at.most(3);
    expect(small.byteSize).to.be.at.most(3 * (256 + 20));
    expect(small.lookup("k1")).to.equal(undefined);
    expect(small.fill(small.ticket(CATALOG_GROUP), "huge", answer("x".repeat(2_000)))).to.equal(false);
  });
});

describe("edge cache: the lease rule (fake clock)", () => {
  let now = 1_000;
  const clock = () => now;

  it("serves only from a granted renewal, for the lease counted from its sending", () => {
    now = 1_000;
    const lease = new CacheLease(clock);
    expect(lease.serves()).to.equal(false);
    lease.subscribed(10n);
    expect(lease.serves(), "subscribed, no lease yet").to.equal(false);
    const ticket = lease.renewalSent()!;
    now += 300; // the answer takes 300 ms to come back
    lease.granted(ticket, 2_000, 10n);
    expect(lease.serves()).to.equal(true);
    now = 1_000 + 1_999;
    expect(lease.serves()).to.equal(true);
    now = 1_000 + 2_000; // 2 s after SENDING, not after the answer
    expect(lease.serves()).to.equal(false);
    expect(lease.expired()).to.equal(true);
  });

  it("does not serve before the position required by the lease is applied", () => {
    now = 0;
    const lease = new CacheLease(clock);
    lease.subscribed(5n);
    lease.granted(lease.renewalSent()!, 2_000, 7n);
    expect(lease.serves()).to.equal(false);
    lease.applied(6n);
    expect(lease.serves()).to.equal(false);
    lease.applied(7n);
    expect(lease.serves()).to.equal(true);
    // A later renewal's answer never lowers what is required.
    lease.granted(lease.renewalSent()!, 2_000, 3n);
    expect(lease.serves()).to.equal(true);
    lease.applied(4n); // never moves back
    expect(lease.position).to.equal(7n);
  });

  it("grants nothing for a renewal of an earlier subscription, and nothing once lost", () => {
    now = 0;
    const lease = new CacheLease(clock);
    lease.subscribed(1n);
    const old = lease.renewalSent()!;
    lease.lost();
    expect(lease.renewalSent()).to.equal(undefined);
    lease.granted(old, 2_000, 1n);
    expect(lease.serves()).to.equal(false);
    lease.subscribed(2n);
    lease.granted(old, 2_000, 1n);
    expect(lease.serves(), "the old subscription's renewal").to.equal(false);
    lease.granted(lease.renewalSent()!, 2_000, 2n);
    expect(lease.serves()).to.equal(true);
    lease.lost();
    expect(lease.serves()).to.equal(false);
    expect(lease.expired(), "nothing to expire once lost").to.equal(false);
  });

  it("keeps the later end of overlapping renewals, each from its own sending", () => {
    now = 0;
    const lease = new CacheLease(clock);
    lease.subscribed(0n);
    const first = lease.renewalSent()!;
    now = 500;
    const second = lease.renewalSent()!;
    now = 600;
    lease.granted(second, 2_000, 0n);
    lease.granted(first, 2_000, 0n); // answered out of order
    now = 2_400;
    expect(lease.serves()).to.equal(true);
    now = 2_500;
    expect(lease.serves()).to.equal(false);
  });
});
