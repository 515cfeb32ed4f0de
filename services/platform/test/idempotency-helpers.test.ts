// The helpers services use around idempotency: derived keys and the result codec.
import { expect } from "chai";
import { createHash } from "node:crypto";
import { jsonResultCodec } from "@switchyard/platform/store";
import { assertIdempotencyKey, derivedIdempotencyKey } from "@switchyard/platform/idempotency-keys.js";

describe("idempotency helpers", () => {
  const secret = "a secret of the calling service, 32+ chars";

  it("derives the same UUID-shaped key for the same operation under the same secret, another for any other", () => {
    const a = derivedIdempotencyKey(secret, "acme", "order-payment", 7n, 3);
    expect(a).to.equal(derivedIdempotencyKey(secret, "acme", "order-payment", 7n, 3));
    expect(() => assertIdempotencyKey(a)).to.not.throw();
    expect(a).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    for (const other of [
      derivedIdempotencyKey(secret, "globex", "order-payment", 7n, 3),
      derivedIdempotencyKey(secret, "acme", "order-payment", 7n, 4),
      derivedIdempotencyKey(secret, "acme", "order-payment", 73n),
      derivedIdempotencyKey(secret, "acme", "order-paymen", "t7", 3),
    ]) {
      expect(other).to.not.equal(a);
    }
  });

  it("cannot be predicted from the public values alone: another secret, another key; no plain hash of the parts", () => {
    const a = derivedIdempotencyKey(secret, "acme", "order-step", 7n, "charge", 1);
    expect(derivedIdempotencyKey(`${secret}!`, "acme", "order-step", 7n, "charge", 1)).to.not.equal(a);
    expect(derivedIdempotencyKey("", "acme", "order-step", 7n, "charge", 1)).to.not.equal(a);
    // What the key was before it had a secret: SHA-256 of the parts, shaped as a UUID.
    const h = createHash("sha256").update(["acme", "order-step", "7", "charge", "1"].join("\u0000")).digest("hex");
    expect(a.replaceAll("-", "").slice(0, 12)).to.not.equal(h.slice(0, 12));
  });

  it("encodes a result so that a replay decodes to the same value, bigints and dates included", () => {
    const codec = jsonResultCodec<{ id: bigint; at: Date; items: { q: bigint; name: string }[]; none: null }>();
    const value = {
      id: 2n ** 62n,
      at: new Date("2026-11-22T08:00:00.123Z"),
      items: [{ q: 3n, name: "x" }],
      none: null,
    };
    expect(codec.decode(codec.encode(value))).to.deep.equal(value);
  });
});
