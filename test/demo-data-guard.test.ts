// Demo data (well-known accounts, a published password) is seeded into embedded storage only: identity
// and content refuse to start with it on a PostgreSQL server — before they connect to it — unless
// DEMO_DATA_FORCE=true says a test database is meant. The override is tested on the real server.
import { expect } from "chai";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { contentConfigFrom } from "@switchyard/content";
import { identityConfigFrom, startIdentityService } from "@switchyard/identity";
import { DEMO_PASSWORD } from "@switchyard/identity/demo-data.js";
import { ConfigError } from "@switchyard/platform/config.js";
import { createLogger } from "@switchyard/platform/logger.js";
import { createServiceClient, openChannel } from "@switchyard/platform/grpc";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const SERVER = "postgres://postgres@127.0.0.1:5432/postgres";
const KEY = { SIGNING_KEY_ENCRYPTION_KEY: randomBytes(32).toString("base64") };

function problemsOf(load: () => unknown): string[] {
  try {
    load();
  } catch (err) {
    expect(err).to.be.instanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  return [];
}

describe("demo data refuses a PostgreSQL server unless forced", function () {
  this.timeout(60_000);

  for (const [service, load, flag] of [
    ["identity", (env: NodeJS.ProcessEnv) => identityConfigFrom({ ...KEY, ...env }), "IDENTITY_DEMO_DATA"],
    ["content", (env: NodeJS.ProcessEnv) => contentConfigFrom(env), "CONTENT_DEMO_DATA"],
  ] as const) {
    it(`${service}: ${flag} with DATABASE_URL is a config error naming the way out; embedded storage or DEMO_DATA_FORCE=true is not`, () => {
      const problems = problemsOf(() => load({ [flag]: "true", DATABASE_URL: SERVER }));
      expect(problems).to.have.length(1);
      expect(problems[0])
        .to.include(`${flag}=true refuses to seed a PostgreSQL server`)
        .and.include("DEMO_DATA_FORCE=true");
      expect(
        problemsOf(() => load({ [flag]: "true", DATABASE_URL: SERVER, DEMO_DATA_FORCE: "false" })),
        "false is no force",
      ).to.have.length(1);
      expect(problemsOf(() => load({ [flag]: "true", DATABASE_URL: SERVER, DEMO_DATA_FORCE: "true" }))).to.deep.equal(
        [],
      );
      expect(
        problemsOf(() => load({ [flag]: "true", DATABASE_URL: "" })),
        "embedded storage",
      ).to.deep.equal([]);
      expect(
        problemsOf(() => load({ [flag]: "false", DATABASE_URL: SERVER })),
        "no demo data",
      ).to.deep.equal([]);
      expect(problemsOf(() => load({ [flag]: "true", DATABASE_URL: SERVER, DEMO_DATA_FORCE: "maybe" }))).to.deep.equal([
        'DEMO_DATA_FORCE: expected true or false, got "maybe"',
      ]);
    });
  }

  it("identity lists it beside its other problems (every problem at once)", () => {
    const problems = problemsOf(() => identityConfigFrom({ IDENTITY_DEMO_DATA: "true", DATABASE_URL: SERVER }));
    expect(problems.map((p) => p.split(/[ =:]/)[0])).to.deep.equal([
      "IDENTITY_DEMO_DATA",
      "SIGNING_KEY_ENCRYPTION_KEY",
    ]);
  });

  describe("the processes stop at start, before they connect to the server", () => {
    let server: Server;
    let connections = 0;
    let port: number;
    before(async () => {
      // Stands where the database server would be, and counts who knocks.
      server = createServer((socket) => {
        connections++;
        socket.destroy();
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      port = (server.address() as { port: number }).port;
    });
    after(() => new Promise<void>((resolve) => server.close(() => resolve())));

    for (const [service, entry, flag] of [
      ["identity", "services/identity/src/main.ts", "IDENTITY_DEMO_DATA"],
      ["content", "services/content/src/main.ts", "CONTENT_DEMO_DATA"],
    ] as const) {
      it(`${service} exits 1 with the config error`, async () => {
        const env = {
          PATH: process.env.PATH,
          ...KEY,
          [flag]: "true",
          DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/postgres`,
          IDENTITY_PORT: "0",
          CONTENT_PORT: "0",
        };
        const child = spawn(process.execPath, ["--import", "tsx", entry], {
          cwd: ROOT,
          env,
          stdio: ["ignore", "pipe", "pipe"],
        });
        let stderr = "";
        child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
        const status = await new Promise<number | null>((resolve) => child.once("exit", resolve));
        expect(status).to.equal(1);
        expect(stderr)
          .to.include(`${service}: failed to start: invalid configuration`)
          .and.include(`${flag}=true refuses to seed a PostgreSQL server`);
        expect(connections, "no connection to the database server").to.equal(0);
      });
    }
  });

  const url = process.env.DATABASE_URL;
  (url ? it : it.skip)(
    "seeds the demo accounts into a PostgreSQL server with DEMO_DATA_FORCE=true (DATABASE_URL)",
    async () => {
      const schema = `identity_demo_${randomBytes(4).toString("hex")}`;
      const dataDir = mkdtempSync(join(tmpdir(), "switchyard-demo-guard-"));
      const runtime = await startIdentityService(
        identityConfigFrom({
          ...KEY,
          DATABASE_URL: url,
          IDENTITY_DB_SCHEMA: schema,
          IDENTITY_PORT: "0",
          IDENTITY_DEMO_DATA: "true",
          DEMO_DATA_FORCE: "true",
          DATA_DIR: dataDir,
          SHED_EVENT_LOOP_DELAY_MS: "0",
        }),
        createLogger("identity", "silent"),
      );
      const channel = openChannel(`127.0.0.1:${runtime.server.port}`);
      try {
        const session = await createServiceClient(IdentityService, channel).createSession({
          tenantId: "acme",
          email: "alice@acme.test",
          password: DEMO_PASSWORD,
        });
        expect(session.user!.email).to.equal("alice@acme.test");
      } finally {
        channel.close();
        await runtime.stop();
        rmSync(dataDir, { recursive: true, force: true });
        const client = new pg.Client(url);
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        await client.end();
      }
    },
  );
});
