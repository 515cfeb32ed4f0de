// CI: the public OpenAPI document may only change additively within /v1 (contract §9). Compared
// against every earlier commit that changed it, so no break slips in through a series of commits.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { breakingChanges } from "./openapi-breaking.js";

const FILE = "gateway/openapi/v1.yaml";
const git = (...args: string[]) => execFileSync("git", args, { encoding: "utf8" });
const current = parse(readFileSync(FILE, "utf8")) as Record<string, unknown>;
const commits = git("log", "--format=%H", "-n", "50", "HEAD~1", "--", FILE).split("\n").filter(Boolean);
let broken = false;
for (const commit of commits) {
  const old = parse(git("show", `${commit}:${FILE}`)) as Record<string, unknown>;
  const breaks = breakingChanges(old, current);
  const label = git("log", "-1", "--format=%h %s", commit).trim();
  if (breaks.length > 0) {
    broken = true;
    console.error(`OpenAPI: breaking changes against ${label}:`);
    for (const b of breaks) console.error(`  ${b.where}: ${b.what}`);
  } else {
    console.log(`OpenAPI: no breaking change against ${label}`);
  }
}
if (commits.length === 0) console.log("OpenAPI: no earlier version to compare with");
process.exit(broken ? 1 : 0);
