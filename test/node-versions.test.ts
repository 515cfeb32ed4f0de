// The Node versions the project says it runs on (package.json's engines, the README) are ones every
// installed package accepts: otherwise `npm ci` on a supported Node prints EBADENGINE warnings (it
// checks each package's own engines against the running Node), and a newcomer following the README
// is told the install is not supported.
import { expect } from "chai";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import semver from "semver";
import { IMAGE_NODE } from "../scripts/node-runtime.mjs";

const ROOT = new URL("..", import.meta.url).pathname;
const readJson = (file: string) => JSON.parse(readFileSync(join(ROOT, file), "utf8"));

describe("supported Node versions", () => {
  const supported = String(readJson("package.json").engines.node);

  it("every package npm ci installs accepts every Node version package.json's engines names", () => {
    const lock = readJson("package-lock.json") as {
      packages: Record<string, { version?: string; engines?: { node?: string } | string[] }>;
    };
    const refusing: string[] = [];
    for (const [path, entry] of Object.entries(lock.packages)) {
      const node = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
      if (node && !semver.subset(supported, node))
        refusing.push(`${path.replace(/^.*node_modules\//, "")}@${entry.version} wants Node ${node}`);
    }
    expect(refusing, `engines "${supported}" includes Node versions these packages refuse`).to.deep.equal([]);
  });

  it("the README says which versions those are", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const said = /Runs on Node ([^(;]*)/.exec(readme)?.[1] ?? "";
    // Each range's lowest version, as the README writes it: "20.19+", "22.13+", "24+".
    const lowest = semver
      .validRange(supported)!
      .split("||")
      .map((range) => semver.minVersion(range)!)
      .map((v) => (v.minor === 0 && v.patch === 0 ? `${v.major}+` : `${v.major}.${v.minor}+`));
    expect(said.match(/\d+(\.\d+)?\+/g), `"Runs on Node …" in the README`).to.deep.equal(lowest);
  });

  it("the image's Node, which the limiter's tests and the benchmark also run on, is the Dockerfile's", () => {
    const dockerfile = readFileSync(join(ROOT, "deploy/Dockerfile"), "utf8");
    const tag = /^ARG NODE_IMAGE=node:(\d+)-/m.exec(dockerfile)?.[1];
    const version = /\(node:\d+-[\w-]+, Node (\d+\.\d+\.\d+),/.exec(dockerfile)?.[1];
    expect(version, "the version the Dockerfile's comment gives its image").to.equal(IMAGE_NODE.version);
    expect(String(semver.major(IMAGE_NODE.version)), "the image's tag").to.equal(tag);
  });
});
