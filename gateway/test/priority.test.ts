// Request priority (issue 46): every operation of both documents states one, the money-moving and
// login routes are critical, what can wait is sheddable, and a request narrows its operation's
// priority only downwards (a page past the first, opening a live stream).
import { expect } from "chai";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadApiDocument, openApiPath } from "../src/runtime/openapi.js";
import { asksForLaterPage, requestPriority } from "../src/runtime/priority.js";

const CRITICAL = ["cancelOrder", "createPayment", "createRefund", "createSession", "deleteSession", "payOrder"];
const SHEDDABLE = ["createCatalogImport", "getCatalogImport", "getOpenApiDocument", "listCatalogItems"];

describe("request priority", () => {
  for (const major of [1, 2]) {
    it(`v${major}: every operation states one; critical and sheddable are the routes the design names`, () => {
      const { operations } = loadApiDocument(openApiPath(major));
      const withPriority = (p: string) =>
        operations
          .filter((o) => o.priority === p)
          .map((o) => o.operationId)
          .sort();
      expect(withPriority("critical")).to.deep.equal(CRITICAL);
      expect(withPriority("sheddable")).to.deep.equal(SHEDDABLE);
      expect(operations.every((o) => ["critical", "default", "sheddable"].includes(o.priority))).to.equal(true);
    });
  }

  it("a document with an operation that states none, or an unknown one, does not load", () => {
    const text = readFileSync(openApiPath(1), "utf8");
    const dir = mkdtempSync(join(tmpdir(), "priority-"));
    for (const [name, changed] of [
      ["none", text.replace(/^ +x-switchyard-priority: critical\n/m, "")],
      ["unknown", text.replace("x-switchyard-priority: critical", "x-switchyard-priority: urgent")],
    ] as const) {
      const file = join(dir, `${name}.yaml`);
      writeFileSync(file, changed);
      expect(() => loadApiDocument(file), name).to.throw(/x-switchyard-priority must be one of/);
    }
  });

  it("a page past the first and opening a live stream are sheddable; critical is never lowered", () => {
    const shapes = [
      { pagesOn: false, eventStream: false },
      { pagesOn: true, eventStream: false },
      { pagesOn: false, eventStream: true },
    ];
    expect(shapes.map((s) => requestPriority({ priority: "default" }, s))).to.deep.equal([
      "default",
      "sheddable",
      "sheddable",
    ]);
    expect(shapes.map((s) => requestPriority({ priority: "critical" }, s))).to.deep.equal([
      "critical",
      "critical",
      "critical",
    ]);
    expect(shapes.map((s) => requestPriority({ priority: "sheddable" }, s))).to.deep.equal([
      "sheddable",
      "sheddable",
      "sheddable",
    ]);
  });

  it("a page past the first is one asked for with a non-empty cursor", () => {
    expect(["cursor=abc", "limit=5&cursor=abc"].map(asksForLaterPage)).to.deep.equal([true, true]);
    expect(["", "limit=5", "cursor=", "limit=5&cursor=&x=1", "xcursor=abc"].map(asksForLaterPage)).to.deep.equal([
      false,
      false,
      false,
      false,
      false,
    ]);
  });
});
