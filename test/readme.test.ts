// The README and the pages of docs/ are a promise: the curl examples (the README's Try it and the tour
// that goes on from it) are run as written against the real mesh (only the ports are swapped for free
// ones) and name routes of the published documents, the configuration table names every setting in at
// most two sentences a row, the list of errors every status the gateway answers with, and every link
// leads somewhere. The README stays a page a newcomer reads in five minutes.
import { expect } from "chai";
import { execFile, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { identitySettings } from "@switchyard/identity";
import { paymentsSettings } from "@switchyard/payments";
import { ordersSettings } from "@switchyard/orders";
import { contentSettings } from "@switchyard/content";
import { gatewaySettings } from "@switchyard/gateway";
import { loadApiDocument, openApiPath } from "@switchyard/gateway/runtime/openapi.js";
import { Router } from "@switchyard/gateway/runtime/router.js";
import { HTTP_STATUS } from "@switchyard/gateway/runtime/errors.js";
import { errorCatalogue } from "@switchyard/platform/errors.js";
import { parseAllDocuments } from "yaml";
import { NODE_FLAGS, startMesh, type Mesh } from "../scripts/mesh.js";
import { adminSettings } from "../scripts/admin-cli.js";

const run = promisify(execFile);
const ROOT = new URL("..", import.meta.url).pathname;
const read = (file: string) => readFileSync(join(ROOT, file), "utf8");
const readme = read("README.md");
/** Where each promise now lives: the README links to every one of these pages. */
const DOCS = {
  tour: "docs/tour.md",
  configuration: "docs/configuration.md",
  api: "docs/api.md",
  operations: "docs/operations.md",
};
const docsPages = readdirSync(join(ROOT, "docs"))
  .filter((f) => f.endsWith(".md"))
  .map((f) => `docs/${f}`);
/** Every page of prose whose links must lead somewhere. */
const pages = ["README.md", ...docsPages, "deploy/README.md"];

/** From the heading `## title` of the file to the next heading of that level. */
function section(file: string, title: string): string {
  const text = read(file);
  const start = text.indexOf(`## ${title}`);
  expect(start, `${file} has a "${title}" section`).to.be.greaterThan(-1);
  const end = text.indexOf("\n## ", start + 3);
  return text.slice(start, end === -1 ? undefined : end);
}

/** Try it as a reader runs it: the README's blocks, then the tour's, which go on in the same shell. */
const tryIt = () => `${section("README.md", "Try it")}\n${read(DOCS.tour)}`;

/** Prose without its fenced code blocks and inline code, whose brackets and hashes are no markdown. */
const prose = (text: string) => text.replace(/^```[\s\S]*?^```/gm, "").replace(/`[^`\n]*`/g, "x");

/** GitHub's anchor for a heading: lower case, punctuation but hyphens dropped, each space a hyphen. */
const anchor = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");

/** The anchors of a markdown file's headings (a repeated heading gets -1, -2, … as on GitHub). */
function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const [, heading] of text.replace(/^```[\s\S]*?^```/gm, "").matchAll(/^#{1,6} (.+)$/gm)) {
    const base = anchor(heading!.replace(/`/g, ""));
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/**
 * The flags given to Node before the file it runs, in every place a process is started: the mesh's
 * (NODE_FLAGS), package.json's scripts, the Dockerfile (its command and its examples) and deploy/k8s.
 */
function nodeFlagsInUse(): Set<string> {
  const flags = new Set<string>(NODE_FLAGS);
  const leading = (args: unknown[]) => {
    for (const arg of args.slice(1)) {
      if (typeof arg !== "string" || !arg.startsWith("--")) break;
      flags.add(arg.split("=")[0]!);
    }
  };
  const scripts = Object.values(JSON.parse(read("package.json")).scripts as object);
  const dockerfile = read("deploy/Dockerfile");
  // Shell form: `node --a --b file`.
  for (const text of [...scripts.map(String), dockerfile])
    for (const m of text.matchAll(/\bnode((?:\s+--[\w-]+(?:=\S+)?)+)/g))
      leading(["node", ...m[1]!.trim().split(/\s+/)]);
  // Exec form: ["node", "--a", …].
  for (const m of dockerfile.matchAll(/\["node"[^\]]*\]/g)) leading(JSON.parse(m[0]) as unknown[]);
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) {
      if (node[0] === "node") leading(node);
      node.forEach(visit);
    } else if (node && typeof node === "object") Object.values(node).forEach(visit);
  };
  const k8s = join(ROOT, "deploy", "k8s");
  for (const file of readdirSync(k8s, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".yaml")))
    for (const doc of parseAllDocuments(readFileSync(join(k8s, file), "utf8"))) visit(doc.toJS());
  expect(flags.size, "flags found").to.be.greaterThan(2);
  return flags;
}

describe("README", function () {
  this.timeout(120_000);

  it("stays short: a newcomer reads it in five minutes", () => {
    expect(readme.split("\n").length, "lines of README.md").to.be.at.most(150);
  });

  it("says where to go next: a link to every page of docs/", () => {
    const next = section("README.md", "Where to go next");
    for (const page of docsPages) expect(next, page).to.include(`](${page})`);
  });

  it("links only to files and headings that exist", () => {
    const broken: string[] = [];
    for (const page of pages) {
      for (const [, target] of prose(read(page)).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z][\w+.-]*:/i.test(target!)) continue; // https:, mailto:: not ours to check
        const [path, hash] = target!.split("#") as [string, string | undefined];
        const file = path === "" ? page : join(dirname(page), path);
        if (!existsSync(join(ROOT, file))) broken.push(`${page}: ${target} (no ${file})`);
        else if (hash !== undefined && file.endsWith(".md") && !anchorsOf(read(file)).has(hash))
          broken.push(`${page}: ${target} (no heading #${hash} in ${file})`);
      }
    }
    expect(broken).to.deep.equal([]);
  });

  it("opens with the two commands", () => {
    const firstBlock = /```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? "";
    expect(firstBlock).to.match(/^npm ci && npm start\b/m);
    expect(firstBlock).to.match(/^npm test\b/m);
  });

  it("documents every environment variable the processes read", () => {
    const table = read(DOCS.configuration);
    for (const spec of [
      identitySettings,
      paymentsSettings,
      ordersSettings,
      contentSettings,
      gatewaySettings,
      adminSettings,
    ]) {
      for (const s of Object.values(spec)) expect(table, s.env).to.include(`\`${s.env}\``);
    }
  });

  it("says what each setting is in at most two sentences (and 60 words) a row", () => {
    const rows = read(DOCS.configuration)
      .split("\n")
      .filter((line) => line.startsWith("| `"));
    expect(rows.length, "rows of the configuration table").to.be.greaterThan(40);
    for (const row of rows) {
      const meaning = row.split("|").at(-2)!;
      // Code and link targets hold dots that end no sentence.
      const words = meaning
        .replace(/`[^`]*`/g, "x")
        .replace(/\]\([^)]*\)/g, "]")
        .trim();
      const sentences = words.split(/(?<=[.!?])\s+/).filter((s) => s.length > 0);
      expect(sentences.length, `${row.split("|")[1]!.trim()}: sentences`).to.be.at.most(2);
      expect(words.split(/\s+/).length, `${row.split("|")[1]!.trim()}: words`).to.be.at.most(60);
    }
  });

  it("lists every status the gateway's error table answers with among its errors", () => {
    const errors = /^- Errors: [\s\S]*?(?=\n- )/m.exec(read(DOCS.api))?.[0] ?? "";
    for (const status of new Set(Object.values(HTTP_STATUS)))
      expect(errors, `status ${status}`).to.match(new RegExp(`\\b${status}\\b`));
  });

  it("sends every request of Try it to a route of the published documents, with header parameters that route takes", () => {
    const router = new Router([1, 2].flatMap((major) => loadApiDocument(openApiPath(major)).operations));
    // Logical lines (continuations joined); each curl to the gateway, however its output is used.
    const lines = tryIt()
      .replace(/\\\n\s*/g, " ")
      .split("\n");
    const requests = lines
      .flatMap((line) => [...line.matchAll(/curl (.*)$/g)].map((m) => m[1]!))
      .filter((args) => args.includes("127.0.0.1:8080"));
    expect(requests.length).to.be.greaterThan(20);
    for (const args of requests) {
      const method = /-X (\w+)/.exec(args)?.[1] ?? (/ -d /.test(args) ? "POST" : "GET");
      // A shell variable stands for a path parameter.
      const path = /127\.0\.0\.1:8080([^"'\s?]*)/.exec(args)![1]!.replace(/\$\w+/g, "x");
      let operation;
      try {
        operation = router.match(method, path).operation;
      } catch (err) {
        expect.fail(`${method} ${path}: ${String(err)}`);
      }
      for (const [, name] of args.matchAll(/-H ["']([\w-]+):/g)) {
        if (["authorization", "content-type", "accept"].includes(name!.toLowerCase())) continue;
        expect(
          operation.headerParams.map((p) => p.key),
          `${method} ${path} takes ${name}`,
        ).to.include(name!.toLowerCase());
      }
    }
  });

  it("promises no declined payment while payments declines nothing", () => {
    // A decline would be a reason of the error catalogue; without one, no source is ever declined.
    const declines = Object.keys(errorCatalogue).filter((reason) => /DECLIN/.test(reason));
    if (declines.length > 0) return;
    const documents = [1, 2].map((major) => readFileSync(openApiPath(major), "utf8"));
    const prosePages = ["README.md", ...docsPages].map((page) => [page, read(page)] as const);
    for (const [name, text] of [...prosePages, ...documents.map((d, i) => [`v${i + 1}.yaml`, d] as const)]) {
      const promises = text.split("\n").filter((line) => /declin/i.test(line) && !line.includes("none is declined"));
      expect(promises, `${name} speaks of declines`).to.deep.equal([]);
    }
  });

  it("names and explains every flag Node is started with, wherever a process starts", () => {
    const table = section(DOCS.operations, "Node flags");
    for (const flag of nodeFlagsInUse()) {
      const why = new RegExp(`^\\| \`${flag}\` \\|[^|]+\\|([^|]+)\\|$`, "m").exec(table)?.[1] ?? "";
      expect(why.trim().length, `${flag}: a row of "Node flags" that says why`).to.be.greaterThan(40);
    }
  });

  describe("Try it, run as written", () => {
    let mesh: Mesh;
    let dataDir: string;
    before(async () => {
      dataDir = mkdtempSync(join(tmpdir(), "switchyard-readme-"));
      // Counters in a shared Redis (REDIS_URL in CI) are this run's own.
      const prefix = `switchyard:test:readme:${randomUUID()}`;
      mesh = await startMesh({
        dataDir,
        demoData: true,
        output: "collect",
        // As npm start runs it (scripts/start.ts): with server reflection, which the gRPC example uses.
        env: {
          DATABASE_URL: "",
          LOG_LEVEL: "warn",
          GRPC_REFLECTION: "true",
          GATEWAY_RATE_LIMIT_PREFIX: `${prefix}:rl`,
          LOGIN_THROTTLE_PREFIX: `${prefix}:login`,
        },
      });
    });
    after(async () => {
      await mesh?.stop();
      rmSync(dataDir, { recursive: true, force: true });
    });

    it("gives the statuses its comments promise", async () => {
      const blocks = [...tryIt().matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
      expect(blocks.length).to.be.greaterThan(3);
      const script = ["set -euo pipefail", ...blocks]
        .join("\n")
        .replaceAll("127.0.0.1:8080", `127.0.0.1:${mesh.ports.gateway}`)
        .replaceAll("127.0.0.1:50051", `127.0.0.1:${mesh.ports.identity}`);
      const expected = [...script.matchAll(/^# expect: (\d{3})$/gm)].map((m) => m[1]);
      const { stdout } = await run("bash", ["-c", script], { cwd: ROOT, maxBuffer: 10 * 1024 * 1024 });
      const statuses = [...stdout.matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((m) => m[1]);
      expect(statuses).to.deep.equal(expected);
      expect(stdout, "the gRPC example answered with a token").to.match(/"accessToken": "ey/);
      expect(stdout).to.match(/idempotent-replayed: true/i);
      expect(stdout).to.match(/www-authenticate: Bearer/i);
      expect(stdout, "the v1 user route says it is deprecated").to.match(/^deprecation: @\d+/im);
      expect(stdout, "and names its v2 successor").to.match(/<\/v2\/tenants\/acme\/users>; rel="successor-version"/);
    });

    it("stops at a failed login, saying why, instead of going on with a token that is no token", async () => {
      const login = /```sh\n([\s\S]*?)```/.exec(section("README.md", "Try it"))![1]!;
      expect(login).to.match(/^TOKEN=/m);
      const script = [
        "set -e",
        login.replace('"password":"demo-password"', '"password":"not-the-password"'),
        'echo "TOKEN=$TOKEN"',
      ]
        .join("\n")
        .replaceAll("127.0.0.1:8080", `127.0.0.1:${mesh.ports.gateway}`);
      const failed = await run("bash", ["-c", script], { cwd: ROOT }).then(
        () => expect.fail("the block went on after a failed login"),
        (err: { code: number; stdout: string; stderr: string }) => err,
      );
      expect(failed.code).to.equal(1);
      expect(failed.stderr).to.match(/no access_token in the answer: .*INVALID_CREDENTIALS/);
      expect(failed.stdout).to.not.include("TOKEN=");
    });

    it("resumes the live feed after the last event seen with Last-Event-ID, as its block shows", async function () {
      this.timeout(60_000);
      const block = /```\n(# Shell 1[\s\S]*?)```/.exec(read(DOCS.tour))?.[1] ?? "";
      const [watch, post, postMissed, resume] = block
        .split("\n")
        .filter((l) => l.startsWith("curl "))
        .map((l) => l.replaceAll("127.0.0.1:8080", `127.0.0.1:${mesh.ports.gateway}`));
      expect(resume, "four commands: watch, post, post while away, resume").to.include(
        "Last-Event-ID: <the last id: it printed>",
      );
      const login = await fetch(`${mesh.gatewayUrl}/v1/tenants/acme/sessions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: "alice@acme.test", password: "demo-password" }),
      });
      const env = { ...process.env, TOKEN: ((await login.json()) as { access_token: string }).access_token };
      // Shell 1 watches (curl stops by itself after a while, should the test not stop it first).
      const watcher = spawn("bash", ["-c", `${watch!} --max-time 30`], { env });
      let watched = "";
      watcher.stdout.setEncoding("utf8").on("data", (d: string) => (watched += d));
      const until = async (what: string, done: () => boolean) => {
        for (const stop = Date.now() + 20_000; !done(); await new Promise((r) => setTimeout(r, 50)))
          if (Date.now() > stop) expect.fail(`${what}; the feed so far: ${watched}`);
      };
      try {
        await until("the feed opened", () => watched.includes("retry:"));
        await run("bash", ["-c", post!], { env });
        await until("Hello arrived on the feed", () => watched.includes('"title":"Hello"'));
      } finally {
        watcher.kill("SIGINT"); // Ctrl-C
      }
      const last = [...watched.matchAll(/^id: (.+)$/gm)].at(-1)![1]!;
      await run("bash", ["-c", postMissed!], { env });
      // Shell 1 again, for 3 s: what it missed first, then the live tail (curl's own timeout ends it: exit 28).
      const { stdout: resumed } = await run(
        "bash",
        ["-c", `${resume!.replace("<the last id: it printed>", last)} --max-time 3 || [ $? -eq 28 ]`],
        { env },
      );
      expect(resumed).to.match(/^data: .*"title":"Missed"/m);
      expect(resumed, "nothing from before the last event seen").to.not.include('"title":"Hello"');
    });
  });
});
