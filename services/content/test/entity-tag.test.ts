// A document's entity tag: clients keep it (If-None-Match, If-Match), so its value for a stored version never changes.
import { expect } from "chai";
import { createHash } from "node:crypto";
import { entityTag } from "../src/domain/content.js";

describe("document entity tags", () => {
  it("keep the value they always had: the quoted first 27 characters of SHA-256(id:version) in base64url", () => {
    expect(entityTag("doc_mt3GimoVJckKUUwmVvPb", 1)).to.equal('"TFTIwMCTdCoWdcVWwRIg9OMixOZ"');
    for (let version = 1; version <= 200; version++) {
      const id = `doc_${version.toString(36).padStart(20, "x")}`;
      const before = `"${createHash("sha256").update(`${id}:${version}`).digest("base64url").slice(0, 27)}"`;
      expect(entityTag(id, version), `${id} v${version}`).to.equal(before);
    }
  });

  it("differ for every version of a document and between documents", () => {
    const tags = new Set<string>();
    for (const id of ["doc_a", "doc_b"]) for (let v = 1; v <= 50; v++) tags.add(entityTag(id, v));
    expect(tags.size).to.equal(100);
  });
});
