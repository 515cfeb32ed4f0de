// Contract §9 on the public API, one fixture pair per kind of change it lists
// (test/fixtures/openapi-evolution/<kind>/{before,after}.yaml): each breaking kind is refused with a
// reason that names it, each additive one passes. Then the CI script itself, in a throwaway git
// repository: each major version is checked against its own history only, and a break fails the build.
import { expect } from "chai";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "yaml";
import { breakingChanges, type Break } from "../scripts/ci/openapi-breaking.js";

const ROOT = new URL("..", import.meta.url).pathname;
const FIXTURES = join(ROOT, "test/fixtures/openapi-evolution");
const fixture = (kind: string, side: "before" | "after") => readFileSync(join(FIXTURES, kind, `${side}.yaml`), "utf8");
const check = (kind: string) => breakingChanges(parse(fixture(kind, "before")), parse(fixture(kind, "after")));

const BREAKING: Record<string, Break[]> = {
  "removed-field": [{ where: "GET /v1/widgets/{widget_id} → 200.colour", what: "field removed" }],
  "renamed-field": [{ where: "POST /v1/widgets body.note", what: 'field removed (renamed to "comment"?)' }],
  "changed-type": [{ where: "GET /v1/widgets/{widget_id} → 200.count", what: "type changed from integer to string" }],
  "tightened-enum": [{ where: "POST /v1/widgets body.colour", what: "enum tightened" }],
  "tightened-validation": [{ where: "POST /v1/widgets body.name", what: "maxLength tightened (100 → 40)" }],
  "changed-default": [{ where: "GET /v1/widgets query:limit", what: "default changed (20 → 50)" }],
  "changed-error-envelope": [
    { where: "GET /v1/widgets/{widget_id} → 400.code", what: "error envelope changed: no longer always present" },
    {
      where: "GET /v1/widgets/{widget_id} → 400.error",
      what: "error envelope changed: type changed from string to object",
    },
    { where: "GET /v1/widgets/{widget_id} → 400.code", what: "error envelope changed: field removed" },
  ],
  "new-required-field": [{ where: "POST /v1/widgets body.owner", what: "became required" }],
};
const ADDITIVE = ["new-optional-field", "new-endpoint", "new-enum-value"];

describe("OpenAPI evolution fixtures (contract §9)", () => {
  it("has a verdict for every fixture pair", () => {
    expect(readdirSync(FIXTURES).sort()).to.deep.equal([...Object.keys(BREAKING), ...ADDITIVE].sort());
  });

  for (const [kind, expected] of Object.entries(BREAKING)) {
    it(`refuses ${kind.replaceAll("-", " ")}, and says so`, () => {
      expect(check(kind)).to.deep.equal(expected);
    });
  }

  for (const kind of ADDITIVE) {
    it(`lets ${kind.replaceAll("-", " ")} through`, () => {
      expect(check(kind)).to.deep.equal([]);
    });
  }
});

describe("check-openapi-breaking (the CI script, in a scratch git repository)", function () {
  this.timeout(60_000);
  let repo: string;
  beforeEach(() => {
    repo = mkdtempSync(join(tmpdir(), "switchyard-openapi-ci-"));
    mkdirSync(join(repo, "gateway/openapi"), { recursive: true });
    git("init", "-q");
  });
  afterEach(() => rmSync(repo, { recursive: true, force: true }));

  const git = (...args: string[]) => {
    const r = spawnSync(
      "git",
      ["-c", "user.name=test", "-c", "user.email=test@example.test", "-c", "commit.gpgsign=false", ...args],
      { cwd: repo, encoding: "utf8" },
    );
    if (r.status !== 0) throw new Error(`git ${args.join(" ")}: ${r.stderr}`);
  };
  const commit = (files: Record<string, string>, message: string) => {
    for (const [name, text] of Object.entries(files)) writeFileSync(join(repo, "gateway/openapi", name), text);
    git("add", "-A");
    git("commit", "-q", "-m", message);
  };
  const runCheck = () => {
    const r = spawnSync(join(ROOT, "node_modules/.bin/tsx"), [join(ROOT, "scripts/ci/check-openapi-breaking.ts")], {
      cwd: repo,
      encoding: "utf8",
      timeout: 30_000,
    });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  };

  it("fails on a break within v1, and passes a new v2 with no history, saying so", () => {
    commit({ "v1.yaml": fixture("removed-field", "before") }, "v1");
    commit(
      { "v1.yaml": fixture("removed-field", "after"), "v2.yaml": fixture("renamed-field", "after") },
      "v1 loses a field; v2 appears",
    );
    const { status, stdout, stderr } = runCheck();
    expect(status, stdout + stderr).to.equal(1);
    expect(stderr).to.match(
      /OpenAPI v1: breaking changes against \w+ v1:\n {2}GET \/v1\/widgets\/\{widget_id\} → 200\.colour: field removed/,
    );
    expect(stdout).to.include("OpenAPI v2: no earlier version to compare with");
  });

  it("compares each version with its own history only: v2 may break what v1 had, v1 may grow", () => {
    commit({ "v1.yaml": fixture("new-optional-field", "before") }, "v1");
    commit(
      { "v1.yaml": fixture("new-optional-field", "after"), "v2.yaml": fixture("tightened-validation", "after") },
      "v1 grows; v2 (maxLength 40) appears",
    );
    commit({ "v2.yaml": fixture("tightened-validation", "before") }, "v2 loosens");
    const { status, stdout, stderr } = runCheck();
    expect(status, stdout + stderr).to.equal(0);
    expect(stdout).to.match(/OpenAPI v1: no breaking change against \w+ v1\n/);
    expect(stdout).to.match(/OpenAPI v2: no breaking change against \w+ v1 grows/);
  });

  it("fails on an uncommitted break, and on a version that disappears", () => {
    commit(
      { "v1.yaml": fixture("changed-default", "before"), "v2.yaml": fixture("new-endpoint", "before") },
      "v1 and v2",
    );
    writeFileSync(join(repo, "gateway/openapi/v1.yaml"), fixture("changed-default", "after"));
    rmSync(join(repo, "gateway/openapi/v2.yaml"));
    const { status, stderr } = runCheck();
    expect(status).to.equal(1);
    expect(stderr).to.include("GET /v1/widgets query:limit: default changed (20 → 50)");
    expect(stderr).to.match(
      /OpenAPI v2: breaking changes against \w+ v1 and v2 \(the document is gone\):\n {2}GET \/v1\/widgets\/\{widget_id\}: operation removed/,
    );
  });
});
