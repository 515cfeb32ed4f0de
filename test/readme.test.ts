// The README is a promise: its curl examples are run as written against the real mesh (only the
// ports are swapped for free ones), and its configuration table names every setting.
import { expect } from "chai";
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { identitySettings } from "@switchyard/identity";
import { paymentsSettings } from "@switchyard/payments";
import { ordersSettings } from "@switchyard/orders";
import { contentSettings } from "@switchyard/content";
import { gatewaySettings } from "@switchyard/gateway";
import { startMesh, type Mesh } from "../scripts/mesh.js";
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

describe("README", function () {
  this.timeout(120_000);

  it("opens with the two commands", () => {
    const firstBlock = /```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? "";
    expect(firstBlock).to.match(/^npm ci && npm start\b/m);
    expect(firstBlock).to.match(/^npm test\b/m);
  });

  it("documents every environment variable the processes read", () => {
    const table = section("Configuration");
    for (const spec of [identitySettings, paymentsSettings, ordersSettings, contentSettings, gatewaySettings, adminSettings]) {
      for (const s of Object.values(spec)) expect(table, s.env).to.include(`\`${s.env}\``);
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
        env: { DATABASE_URL: "", LOG_LEVEL: "warn", GRPC_REFLECTION: "true", GATEWAY_RATE_LIMIT_PREFIX: `${prefix}:rl`, LOGIN_THROTTLE_PREFIX: `${prefix}:login` },
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
    });
  });
});
