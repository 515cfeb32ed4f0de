// Package boundaries, read off what the build put into each process's bundle (dist/meta.json, written
// by npm run build, which the test run does first): the gateway loads no database code and no
// service's code; a service bundles no other service; the operator's CLI opens no database. The
// platform package has no entry that loads everything: it is imported by subpath.
import { expect } from "chai";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
type Contents = Record<string, { sources: string[]; imports: string[] }>;
// Read when the tests run: mocha loads test files before its global setup builds dist/.
let bundles: Contents = {};
const SERVICES = ["identity", "payments", "orders", "content", "webhooks"] as const;
const DATABASE_PACKAGES = ["pg", "@electric-sql/pglite"];
const bundle = (name: string) => {
  const b = bundles[`${name}.js`];
  expect(b, `dist/${name}.js was built`).to.not.equal(undefined);
  return b!;
};
const packageOf = (specifier: string) =>
  specifier
    .split("/")
    .slice(0, specifier.startsWith("@") ? 2 : 1)
    .join("/");

describe("package boundaries (what each bundle holds)", () => {
  before(() => {
    bundles = JSON.parse(readFileSync(`${ROOT}dist/meta.json`, "utf8")) as Contents;
  });

  it("the gateway loads no database code: no store adapter, no database driver, no service's code", () => {
    const { sources, imports } = bundle("gateway");
    expect(
      sources.filter((s) => s.startsWith("services/platform/src/store/")),
      "store adapters",
    ).to.deep.equal([]);
    expect(
      imports.map(packageOf).filter((p) => DATABASE_PACKAGES.includes(p)),
      "database drivers",
    ).to.deep.equal([]);
    expect(
      sources.filter((s) => /^services\/(identity|payments|orders|content|webhooks)\//.test(s)),
      "a service's code",
    ).to.deep.equal([]);
    expect(
      sources.some((s) => s.startsWith("gateway/src/")),
      "its own code",
    ).to.equal(true);
  });

  it("the operator's command line opens no database either", () => {
    const { sources, imports } = bundle("admin");
    expect(
      sources.filter(
        (s) =>
          s.startsWith("services/platform/src/store/") ||
          /^services\/(identity|payments|orders|content|webhooks)\//.test(s),
      ),
    ).to.deep.equal([]);
    expect(imports.map(packageOf).filter((p) => DATABASE_PACKAGES.includes(p))).to.deep.equal([]);
  });

  for (const service of SERVICES) {
    it(`${service} bundles its own code and the platform, no other service's and not the gateway's`, () => {
      const { sources, imports } = bundle(service);
      const others = SERVICES.filter((s) => s !== service);
      expect(
        sources.filter((s) => others.some((o) => s.startsWith(`services/${o}/`)) || s.startsWith("gateway/")),
        "foreign code",
      ).to.deep.equal([]);
      expect(sources.some((s) => s.startsWith(`services/${service}/src/`))).to.equal(true);
      expect(imports.map(packageOf), "its database drivers").to.include.members(DATABASE_PACKAGES);
    });
  }

  it("the platform package is imported by subpath only: it has no entry that loads everything", () => {
    const pkg = JSON.parse(readFileSync(`${ROOT}services/platform/package.json`, "utf8")) as {
      exports: Record<string, string>;
    };
    expect(Object.keys(pkg.exports)).not.to.include(".");
    expect(pkg.exports["./store"]).to.equal("./src/store/index.ts");
  });
});
