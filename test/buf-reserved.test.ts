// A removed field's number and name stay reserved (contract §9, binary schema evolution): with the
// repository's own breaking config, `buf breaking` refuses a NewItem that frees either for reuse,
// the compiler refuses a field on a reserved number, and a field on a new number passes.
// Fixtures: test/fixtures/buf-reserved/<case>/ — each its own buf module, outside the root
// buf.yaml's `modules: [proto]`, so `buf lint` and check-breaking.sh never see them.
import { expect } from "chai";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { parse } from "yaml";

const require = createRequire(import.meta.url);
const ROOT = new URL("..", import.meta.url).pathname;
const FIXTURES = join(ROOT, "test/fixtures/buf-reserved");
const PROTO = "switchyard/orders/v1/orders.proto";
const BUF = join(dirname(require.resolve("@bufbuild/buf/package.json")), "bin", "buf");
const CASES = ["before", "reuses-number", "reuses-name", "uses-reserved", "new-number"];

interface BufError {
  path: string;
  type: string;
  message: string;
}

function breaking(after: string): { status: number | null; errors: BufError[] } {
  const run = spawnSync(BUF, ["breaking", after, "--against", "before", "--error-format", "json"], {
    cwd: FIXTURES,
    encoding: "utf8",
    timeout: 30_000,
  });
  const errors = run.stdout
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as BufError);
  return { status: run.status, errors };
}

const newItemBlock = (proto: string) => /\n(\/\/[^\n]*\n)*message NewItem \{[\s\S]*?\n\}\n/.exec(proto)?.[0];

describe("reserved field numbers and names (buf breaking on NewItem)", () => {
  it("tests the real NewItem under the real breaking config", () => {
    const real = readFileSync(join(ROOT, "proto", PROTO), "utf8");
    expect(newItemBlock(real), "proto/ has NewItem").to.be.a("string");
    expect(newItemBlock(readFileSync(join(FIXTURES, "before", PROTO), "utf8"))).to.equal(newItemBlock(real));
    const rootBreaking = (parse(readFileSync(join(ROOT, "buf.yaml"), "utf8")) as { breaking: unknown }).breaking;
    for (const c of CASES) {
      expect(
        (parse(readFileSync(join(FIXTURES, c, "buf.yaml"), "utf8")) as { breaking: unknown }).breaking,
        c,
      ).to.deep.equal(rootBreaking);
    }
  });

  it("fails when number 3 is freed and reused", () => {
    const { status, errors } = breaking("reuses-number");
    expect(status).to.not.equal(0);
    expect(errors).to.have.length(1);
    expect(errors[0]).to.include({ type: "RESERVED_MESSAGE_NO_DELETE" });
    expect(errors[0]!.message).to.match(/reserved range "\[3\]" on message "NewItem"/);
  });

  it('fails when the name "unit_price" is freed and reused on a new number', () => {
    const { status, errors } = breaking("reuses-name");
    expect(status).to.not.equal(0);
    expect(errors).to.have.length(1);
    expect(errors[0]).to.include({ type: "RESERVED_MESSAGE_NO_DELETE" });
    expect(errors[0]!.message).to.match(/reserved name "unit_price" on message "NewItem"/);
  });

  it("does not compile a field on the reserved number while the reservation stands", () => {
    const { status, errors } = breaking("uses-reserved");
    expect(status).to.not.equal(0);
    expect(errors.map((e) => [e.type, e.message])).to.deep.equal([["COMPILE", "use of reserved field number `3`"]]);
  });

  it("passes a new field on a never-used number with the reservations kept", () => {
    expect(breaking("new-number")).to.deep.equal({ status: 0, errors: [] });
  });
});
