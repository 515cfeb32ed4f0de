// The bench's same-work reference measures what the read paths cost with the libraries alone (issue
// 34): were one of its processes to load the project's own server bootstrap, adapters, store code or
// mappings, the ratio would hide the very cost it is meant to show. Read off the import lines of every
// server file bench/same-work-reference.ts starts and of every file those import in turn: packages
// only (no @switchyard/…), and project files only from bench/servers.
import { expect } from "chai";
import { readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const SERVERS = join(ROOT, "bench/servers");

/** Every module specifier a source names: static and re-exporting `from`, bare `import "…"`, import() and require(). */
function specifiersOf(source: string): { specifiers: string[]; computed: number } {
  const literal = [
    /\bfrom\s*["']([^"']+)["']/g,
    /\bimport\s*["']([^"']+)["']/g,
    /\bimport\s*\(\s*["']([^"']+)["']\s*\)/g,
    /\brequire\s*\(\s*["']([^"']+)["']\s*\)/g,
  ];
  const specifiers = literal.flatMap((pattern) => [...source.matchAll(pattern)].map((m) => m[1]!));
  // import(x) or require(x) of anything but a string literal cannot be read off the text.
  const computed = [...source.matchAll(/\b(?:import|require)\s*\(\s*(?!["'])/g)].length;
  return { specifiers, computed };
}

/** The server files the reference starts: its startServer("…") calls. */
function referenceServers(): string[] {
  const source = readFileSync(join(ROOT, "bench/same-work-reference.ts"), "utf8");
  return [...source.matchAll(/startServer\(\s*["']([^"']+)["']/g)].map((m) => join(SERVERS, m[1]!));
}

/** What each file of the reference's processes imports that it must not, file by file. */
function forbiddenImports(entries: string[]): Record<string, string[]> {
  const found: Record<string, string[]> = {};
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const { specifiers, computed } = specifiersOf(readFileSync(file, "utf8"));
    const bad: string[] = computed > 0 ? [`${computed} import()/require() of a computed name`] : [];
    for (const spec of specifiers) {
      if (spec.startsWith("@switchyard/")) bad.push(spec);
      else if (spec.startsWith(".") || spec.startsWith("/")) {
        const target = resolve(dirname(file), spec).replace(/\.js$/, ".ts");
        if (relative(SERVERS, target).startsWith("..") || !target.startsWith(SERVERS)) bad.push(spec);
        else visit(target);
      }
    }
    if (bad.length > 0) found[relative(ROOT, file)] = bad;
  };
  entries.forEach(visit);
  return found;
}

describe("the bench's same-work reference (libraries only)", () => {
  it("starts its processes from bench/servers", () => {
    const servers = referenceServers().map((f) => relative(ROOT, f));
    expect(servers).to.have.members(["bench/servers/same-work-read.ts", "bench/servers/same-work-front.ts"]);
  });

  it("imports no @switchyard module and no project file outside bench/servers, in any file its processes load", () => {
    expect(forbiddenImports(referenceServers())).to.deep.equal({});
  });

  it("reads every kind of import line (the check itself)", () => {
    const source = [
      `import { a } from "@switchyard/platform/store";`,
      `import {\n  b,\n  c,\n} from "../../services/payments/src/store/sql-store.js";`,
      `import "./child.js";`,
      `export { d } from "pg";`,
      `const e = await import("@switchyard/gen/x.js");`,
      `const f = require("../scripts/mesh.js");`,
      `const g = await import(name);`,
    ].join("\n");
    expect(specifiersOf(source)).to.deep.equal({
      specifiers: [
        "@switchyard/platform/store",
        "../../services/payments/src/store/sql-store.js",
        "pg",
        "./child.js",
        "@switchyard/gen/x.js",
        "../scripts/mesh.js",
      ],
      computed: 1,
    });
  });
});
