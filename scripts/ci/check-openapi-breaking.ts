// CI: one public OpenAPI document per major version (gateway/openapi/v<N>.yaml), and each may only
// change additively (contract §9) — breaking changes go into a new major version. So each document
// is compared against its own history only (never v2 against v1), against every earlier commit that
// changed it, so no break slips in through a series of commits. A document that disappears is
// compared as empty: a version stays available (every operation of it removed is a break).
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { parse } from "yaml";
import { breakingChanges, type Break } from "./openapi-breaking.js";

const DIR = "gateway/openapi";
const VERSION_FILE = /^v(\d+)\.yaml$/;

export interface EarlierVersion {
  label: string;
  text: string;
}

/** The same break behind many operations (the shared error envelope) is printed once, with a count. */
export function describeBreaks(breaks: Break[]): string[] {
  const groups = new Map<string, Break[]>();
  for (const b of breaks) {
    const key = `${b.where.replace(/^[A-Z]+ \S+/, "")}\u0000${b.what}`;
    groups.set(key, [...(groups.get(key) ?? []), b]);
  }
  return [...groups.values()].map(
    ([first, ...rest]) =>
      `  ${first!.where}: ${first!.what}${rest.length > 0 ? ` (and ${rest.length} more operations)` : ""}`,
  );
}

/** One major version's document against its own earlier versions; true when nothing breaks. */
export function checkVersion(
  name: string,
  current: string | undefined,
  earlier: EarlierVersion[],
  log = console.log,
  error = console.error,
): boolean {
  const doc = (current === undefined ? {} : (parse(current) ?? {})) as Record<string, unknown>;
  const differing = earlier.filter((e) => e.text !== current);
  if (differing.length === 0) {
    log(`OpenAPI ${name}: no earlier version to compare with`);
    return true;
  }
  let ok = true;
  for (const e of differing) {
    const breaks = breakingChanges(parse(e.text) as Record<string, unknown>, doc);
    if (breaks.length > 0) {
      ok = false;
      error(
        `OpenAPI ${name}: breaking changes against ${e.label}${current === undefined ? " (the document is gone)" : ""}:`,
      );
      for (const line of describeBreaks(breaks)) error(line);
    } else {
      log(`OpenAPI ${name}: no breaking change against ${e.label}`);
    }
  }
  return ok;
}

function main(): void {
  const git = (...args: string[]) => execFileSync("git", args, { encoding: "utf8" });
  process.chdir(git("rev-parse", "--show-toplevel").trim());
  // From HEAD, not HEAD~1: an edit not yet committed is checked against the last commit too.
  const hasHead = (() => {
    try {
      git("rev-parse", "--verify", "-q", "HEAD");
      return true;
    } catch {
      return false;
    }
  })();
  const history = (path: string) =>
    hasHead ? git("log", "--format=%H", "-n", "50", "HEAD", "--", path).split("\n").filter(Boolean) : [];
  const names = new Set(existsSync(DIR) ? readdirSync(DIR).filter((f) => VERSION_FILE.test(f)) : []);
  for (const path of hasHead ? git("log", "--format=", "--name-only", "HEAD", "--", DIR).split("\n") : []) {
    const file = path.slice(DIR.length + 1);
    if (path.startsWith(`${DIR}/`) && VERSION_FILE.test(file)) names.add(file);
  }
  if (names.size === 0) {
    console.error(`OpenAPI: no ${DIR}/v<N>.yaml found`);
    process.exit(1);
  }
  let ok = true;
  for (const file of [...names].sort((a, b) => Number(VERSION_FILE.exec(a)![1]) - Number(VERSION_FILE.exec(b)![1]))) {
    const path = `${DIR}/${file}`;
    const earlier = history(path).flatMap((commit) => {
      let text: string;
      try {
        text = git("show", `${commit}:${path}`);
      } catch {
        return []; // the commit deleted it
      }
      return [{ label: git("log", "-1", "--format=%h %s", commit).trim(), text }];
    });
    const current = existsSync(path) ? readFileSync(path, "utf8") : undefined;
    if (!checkVersion(file.replace(/\.yaml$/, ""), current, earlier)) ok = false;
  }
  process.exit(ok ? 0 : 1);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) main();
