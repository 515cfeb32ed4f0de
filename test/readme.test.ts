// The README is a promise: its curl examples are run as written against the real mesh (only the
// ports are swapped for free ones) and name routes of the published documents, its configuration
// table names every setting, and its list of errors every status the gateway answers with.
import { expect } from "chai";
import { execFile, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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
const readme = readFileSync(join(ROOT, "README.md"), "utf8");

function section(title: string): string {
  const start = readme.indexOf(`## ${title}`);
  expect(start, `README has a "${title}" section`).to.be.greaterThan(-1);
  const end = readme.indexOf("\n## ", start + 3);
  return readme.slice(start, end === -1 ? undefined : end);
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
  const scripts = Object.values(JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).scripts as object);
  const dockerfile = readFileSync(join(ROOT, "deploy", "Dockerfile"), "utf8");
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

  it("opens with the two commands", () => {
    const firstBlock = /```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? "";
    expect(firstBlock).to.match(/^npm ci && npm start\b/m);
    expect(firstBlock).to.match(/^npm test\b/m);
  });

  it("documents every environment variable the processes read", () => {
    const table = section("Configuration");
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

  it("lists every status the gateway's error table answers with among its errors", () => {
    const errors = /^- Errors: [\s\S]*?(?=\n- )/m.exec(section("The public API in short"))?.[0] ?? "";
    for (const status of new Set(Object.values(HTTP_STATUS)))
      expect(errors, `status ${status}`).to.match(new RegExp(`\\b${status}\\b`));
  });

  it("sends every request of Try it to a route of the published documents, with header parameters that route takes", () => {
    const router = new Router([1, 2].flatMap((major) => loadApiDocument(openApiPath(major)).operations));
    // Logical lines (continuations joined); each curl to the gateway, however its output is used.
    const lines = section("Try it")
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
    for (const [name, text] of [["README.md", readme], ...documents.map((d, i) => [`v${i + 1}.yaml`, d])] as const) {
      const promises = text.split("\n").filter((line) => /declin/i.test(line) && !line.includes("none is declined"));
      expect(promises, `${name} speaks of declines`).to.deep.equal([]);
    }
  });

  it("names and explains every flag Node is started with, wherever a process starts", () => {
    const table = section("Node flags");
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
      const blocks = [...section("Try it").matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
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
      const login = /```sh\n([\s\S]*?)```/.exec(section("Try it"))![1]!;
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
      const block = /```\n(# Shell 1[\s\S]*?)```/.exec(section("Try it"))?.[1] ?? "";
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
