// If-None-Match (RFC 9110 §13.1.2), read one way for documents and the API reference alike.
import { expect } from "chai";
import { noneMatchHits } from "../src/runtime/conditional.js";

describe("gateway: If-None-Match", () => {
  it("matches by weak comparison, in a list, and for *; not otherwise", () => {
    expect(noneMatchHits('"abc"', '"abc"')).to.equal(true);
    expect(noneMatchHits('W/"abc"', '"abc"'), "a tag a proxy weakened").to.equal(true);
    expect(noneMatchHits('"x", W/"abc" ', '"abc"')).to.equal(true);
    expect(noneMatchHits("*", '"abc"')).to.equal(true);
    expect(noneMatchHits('"abcd"', '"abc"')).to.equal(false);
    expect(noneMatchHits(undefined, '"abc"')).to.equal(false);
  });
});
