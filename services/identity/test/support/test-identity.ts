// One identity service in the test process, on real gRPC sockets and a real engine (PGlite in a temp
// dir, or the server in `databaseUrl` under a fresh schema), with two service credentials — the
// operator's and orders' — and every log line it writes kept for the test to read.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import pg from "pg";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { OperatorService } from "@switchyard/gen/switchyard/identity/v1/operator_pb.js";
import { identityConfigFrom, startIdentityService, type IdentityRuntime } from "@switchyard/identity";
import { createLogger } from "@switchyard/platform/logger.js";
import { SERVICE_AUTHORIZATION } from "@switchyard/platform/caller.js";
import { createServiceClient, openChannel, type Client } from "@switchyard/platform/grpc";
import { seedPgliteDataDirs } from "../../../platform/test/support/databases.js";

export interface TestIdentity {
  address: string;
  identity: Client<typeof IdentityService>;
  operator: Client<typeof OperatorService>;
  /** The secrets of the `operator` and `orders` entries of IDENTITY_SERVICE_CREDENTIALS. */
  operatorSecret: string;
  ordersSecret: string;
  runtime: IdentityRuntime;
  /** Call options presenting a token of the named service in `service-authorization`. */
  asService(name: "operator" | "orders"): Promise<{ headers: Record<string, string> }>;
  /** Call options with the token of a demo user (demoData), e.g. "alice@acme.test" of tenant acme. */
  login(email: string): Promise<{ headers: { authorization: string } }>;
  /** Everything identity logged so far (JSON lines, from debug up). */
  logs(): string;
  stop(): Promise<void>;
}

export async function startTestIdentity(
  options: { databaseUrl?: string | undefined; demoData?: boolean } = {},
): Promise<TestIdentity> {
  const dataDir = mkdtempSync(join(tmpdir(), "switchyard-identity-"));
  if (!options.databaseUrl) await seedPgliteDataDirs(dataDir, ["identity"]);
  const schema = `identity_${randomBytes(4).toString("hex")}`;
  const operatorSecret = randomBytes(32).toString("base64url");
  const ordersSecret = randomBytes(32).toString("base64url");
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString("utf8"));
      done();
    },
  });
  const runtime = await startIdentityService(
    identityConfigFrom({
      DATA_DIR: dataDir,
      DATABASE_URL: options.databaseUrl ?? "",
      IDENTITY_PORT: "0",
      IDENTITY_DB_SCHEMA: schema,
      IDENTITY_SERVICE_CREDENTIALS: `orders:${ordersSecret},operator:${operatorSecret}`,
      SIGNING_KEY_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
      // Into a test server's fresh schema on purpose (refused there unless forced).
      ...(options.demoData ? { IDENTITY_DEMO_DATA: "true", DEMO_DATA_FORCE: "true" } : {}),
      // The test shares this event loop: no shedding on it (tested on its own).
      SHED_EVENT_LOOP_DELAY_MS: "0",
    }),
    createLogger("identity", "debug", sink),
  );
  const address = `127.0.0.1:${runtime.server.port}`;
  const channel = openChannel(address);
  const identity = createServiceClient(IdentityService, channel);
  return {
    address,
    identity,
    operator: createServiceClient(OperatorService, channel),
    operatorSecret,
    ordersSecret,
    runtime,
    async asService(name) {
      const { accessToken } = await identity.createServiceToken({
        clientId: name,
        clientSecret: name === "operator" ? operatorSecret : ordersSecret,
      });
      return { headers: { [SERVICE_AUTHORIZATION]: `Bearer ${accessToken}` } };
    },
    async login(email) {
      const tenantId = email.split("@")[1]!.split(".")[0]!;
      const { accessToken } = await identity.createSession({ tenantId, email, password: "demo-password" });
      return { headers: { authorization: `Bearer ${accessToken}` } };
    },
    logs: () => lines.join(""),
    async stop() {
      channel.close();
      await runtime.stop();
      rmSync(dataDir, { recursive: true, force: true });
      if (options.databaseUrl) {
        const client = new pg.Client(options.databaseUrl);
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        await client.end();
      }
    },
  };
}
