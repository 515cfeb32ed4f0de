// The helpers services use around idempotency: derived keys and the result codec.
import { expect } from "chai";
import { jsonResultCodec } from "@switchyard/platform/store";
import { assertIdempotencyKey, derivedIdempotencyKey } from "@switchyard/platform/idempotency-keys.js";

describe("idempotency helpers", () => {
  it("derives the same UUID-shaped key for the same operation, another for any other", () => {
    const a = derivedIdempotencyKey("acme", "order-payment", 7n, 3);
    expect(a).to.equal(derivedIdempotencyKey("acme", "order-payment", 7n, 3));
    expect(() => assertIdempotencyKey(a)).to.not.throw();
    expect(a).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    for (const other of [derivedIdempotencyKey("globex", "order-payment", 7n, 3), derivedIdempotencyKey("acme", "order-payment", 7n, 4), derivedIdempotencyKey("acme", "order-payment", 73n), derivedIdempotencyKey("acme", "order-paymen", "t7", 3)]) {
      expect(other).to.not.equal(a);
    }
  });

  it("encodes a result so that a replay decodes to the same value, bigints and dates included", () => {
    const codec = jsonResultCodec<{ id: bigint; at: Date; items: { q: bigint; name: string }[]; none: null }>();
    const value = { id: 2n ** 62n, at: new Date("2026-11-22T08:00:00.123Z"), items: [{ q: 3n, name: "x" }], none: null };
    expect(codec.decode(codec.encode(value))).to.deep.equal(value);
  });
});
