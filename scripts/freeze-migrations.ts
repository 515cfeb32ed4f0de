// Writes test/fixtures/previous-release-migrations.json: every service's migrations as they were at a
// git revision (the previous release), as the SQL they ran. test/migrations.test.ts applies that set,
// then this tree's, and runs the checks and store tests on the result; it also holds this tree's list
// to begin with that one unchanged (a migration that shipped is never edited).
//   npx tsx scripts/freeze-migrations.ts <rev>      (at each release: the release being replaced)
// A fixture rather than `git show` in the test: the old migrations.ts files import the platform of
// their time, CI may clone without history, and the fixture is the exact SQL, reviewable in a diff.
import { execFileSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Migration } from "@switchyard/platform/store";

const ROOT = new URL("..", import.meta.url).pathname;
const SERVICES = ["identity", "payments", "orders", "content", "webhooks"] as const;
export const FIXTURE = join(ROOT, "test", "fixtures", "previous-release-migrations.json");

const rev = process.argv[2];
if (!rev) {
  process.stderr.write("usage: npx tsx scripts/freeze-migrations.ts <git revision of the previous release>\n");
  process.exit(2);
}
const commit = execFileSync("git", ["rev-parse", `${rev}^{commit}`], { cwd: ROOT, encoding: "utf8" }).trim();
const services: Record<string, Migration[]> = {};
for (const service of SERVICES) {
  const dir = join(ROOT, "services", service, "src", "store");
  const path = `services/${service}/src/store/migrations.ts`;
  // A service newer than that release had no migrations then.
  if (!execFileSync("git", ["ls-tree", "--name-only", commit, path], { cwd: ROOT, encoding: "utf8" }).trim()) {
    services[service] = [];
    continue;
  }
  const source = execFileSync("git", ["show", `${commit}:${path}`], { cwd: ROOT, encoding: "utf8" });
  // Beside the current file, so its imports resolve as they did (the constants it names must not have
  // changed since: the test then finds the current list's first entries equal to these).
  const copy = join(dir, `.migrations-${commit.slice(0, 12)}.ts`);
  writeFileSync(copy, source);
  try {
    const module = (await import(pathToFileURL(copy).href)) as Record<string, unknown>;
    const list = Object.values(module).find((v) => Array.isArray(v)) as Migration[] | undefined;
    if (!list) throw new Error(`${service}: no migration list in ${commit}`);
    services[service] = list.map((m) => ({
      version: m.version,
      name: m.name,
      sql: m.sql,
      ...(m.contract ? { contract: m.contract } : {}),
    }));
  } finally {
    rmSync(copy, { force: true });
  }
}
writeFileSync(FIXTURE, `${JSON.stringify({ commit, services }, null, 2)}\n`);
process.stdout.write(
  `${FIXTURE}: ${SERVICES.map((s) => `${s} ${services[s]!.length}`).join(", ")} (at ${commit.slice(0, 12)})\n`,
);
