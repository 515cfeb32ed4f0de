// Identity, payments, content and orders in this test process (one process keeps service tests fast), on real
// gRPC sockets and a real PostgreSQL engine (PGlite in a temp dir, or the server in DATABASE_URL
// when `onServer` is set, each run under fresh schemas).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import pg from "pg";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { OrderService } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { contentConfigFrom, startContentService, type ContentRuntime } from "@switchyard/content";
import { ordersConfigFrom, startOrdersService, type OrdersRuntime } from "@switchyard/orders";
import { identityConfigFrom, startIdentityService, type IdentityRuntime } from "@switchyard/identity";
import { paymentsConfigFrom, startPaymentsService, type PaymentsRuntime } from "@switchyard/payments";
import { createLogger } from "@switchyard/platform/logger.js";
import { createServiceClient, openChannel, type Client } from "@switchyard/platform/grpc";
import { seedPgliteDataDirs } from "./databases.js";
import { TcpGate } from "./tcp-gate.js";

export interface InProcessMesh {
  identity: Client<typeof IdentityService>;
  payments: Client<typeof PaymentService>;
  orders: Client<typeof OrderService>;
  content: Client<typeof ContentService>;
  identityRuntime: IdentityRuntime;
  paymentsRuntime: PaymentsRuntime;
  contentRuntime: ContentRuntime;
  ordersRuntime: OrdersRuntime;
  identityAddress: string;
  paymentsAddress: string;
  ordersAddress: string;
  /** Orders' own credential at identity (for tests that act as the orders service). */
  ordersSecret: string;
  /** On a PostgreSQL server: the schema orders' tables are in. */
  ordersSchema: string | undefined;
  /** The gates between orders and payments / content, with `gatePayments` / `gateContent`. */
  paymentsGate: TcpGate | undefined;
  contentGate: TcpGate | undefined;
  login(email: string, tenant?: string): Promise<{ authorization: string }>;
  stop(): Promise<void>;
}

export interface InProcessMeshOptions {
  databaseUrl?: string | undefined;
  /** Where orders finds payments; the in-process payments service when absent (tests put a slow one here). */
  paymentsAddressForOrders?: string;
  /** Where orders finds content; the in-process content service when absent. */
  contentAddressForOrders?: string;
  /** More settings of orders (ORDERS_RECONCILE_INTERVAL_MS, …) and of payments (FAULTS, …). */
  ordersEnv?: NodeJS.ProcessEnv;
  paymentsEnv?: NodeJS.ProcessEnv;
  /** Orders reaches payments (content) through a TcpGate the test can shut and reopen. */
  gatePayments?: boolean;
  gateContent?: boolean;
}

export async function startInProcessMesh(options: InProcessMeshOptions = {}): Promise<InProcessMesh> {
  const dataDir = mkdtempSync(join(tmpdir(), "switchyard-svc-"));
  if (!options.databaseUrl) await seedPgliteDataDirs(dataDir, ["identity", "payments", "content", "orders"]);
  const suffix = randomBytes(4).toString("hex");
  // Several services share this one event loop (and block it while their databases start), which
  // no deployment does: their event-loop shedding is off here and tested on its own.
  const common = {
    DATA_DIR: dataDir,
    LOG_LEVEL: "silent",
    DATABASE_URL: options.databaseUrl ?? "",
    IDENTITY_PORT: "0",
    PAYMENTS_PORT: "0",
    ORDERS_PORT: "0",
    CONTENT_PORT: "0",
    SHED_EVENT_LOOP_DELAY_MS: "0",
  };
  const ordersSecret = randomBytes(32).toString("base64url");
  const logger = createLogger("test", "silent");
  const identityRuntime = await startIdentityService(
    identityConfigFrom({
      ...common,
      // Demo data goes into a test server's fresh schemas on purpose (refused there unless forced).
      IDENTITY_DEMO_DATA: "true",
      DEMO_DATA_FORCE: "true",
      IDENTITY_DB_SCHEMA: `identity_${suffix}`,
      IDENTITY_SERVICE_CREDENTIALS: `orders:${ordersSecret}`,
      SIGNING_KEY_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
    }),
    logger,
  );
  const identityAddress = `127.0.0.1:${identityRuntime.server.port}`;
  const paymentsRuntime = await startPaymentsService(
    paymentsConfigFrom({
      ...common,
      IDENTITY_ADDRESS: identityAddress,
      PAYMENTS_DB_SCHEMA: `payments_${suffix}`,
      ...options.paymentsEnv,
    }),
    logger,
  );
  const paymentsAddress = `127.0.0.1:${paymentsRuntime.server.port}`;
  const paymentsGate = options.gatePayments ? await TcpGate.before(paymentsAddress) : undefined;
  const contentRuntime = await startContentService(
    contentConfigFrom({
      ...common,
      IDENTITY_ADDRESS: identityAddress,
      CONTENT_DB_SCHEMA: `content_${suffix}`,
      CONTENT_DEMO_DATA: "true",
      DEMO_DATA_FORCE: "true",
      CATALOG_OWNER_TENANT: "acme",
    }),
    logger,
  );
  const contentAddress = `127.0.0.1:${contentRuntime.server.port}`;
  const contentGate = options.gateContent ? await TcpGate.before(contentAddress) : undefined;
  const ordersRuntime = await startOrdersService(
    ordersConfigFrom({
      ...common,
      IDENTITY_ADDRESS: identityAddress,
      PAYMENTS_ADDRESS: options.paymentsAddressForOrders ?? paymentsGate?.address ?? paymentsAddress,
      CONTENT_ADDRESS: options.contentAddressForOrders ?? contentGate?.address ?? contentAddress,
      ORDERS_DB_SCHEMA: `orders_${suffix}`,
      ORDERS_SERVICE_SECRET: ordersSecret,
      ...options.ordersEnv,
    }),
    logger,
  );
  const ordersAddress = `127.0.0.1:${ordersRuntime.server.port}`;
  const identityChannel = openChannel(identityAddress);
  const paymentsChannel = openChannel(paymentsAddress);
  const ordersChannel = openChannel(ordersAddress);
  const contentChannel = openChannel(contentAddress);
  const identity = createServiceClient(IdentityService, identityChannel);
  const payments = createServiceClient(PaymentService, paymentsChannel);
  const orders = createServiceClient(OrderService, ordersChannel);
  const content = createServiceClient(ContentService, contentChannel);
  return {
    identity,
    payments,
    orders,
    content,
    identityRuntime,
    paymentsRuntime,
    contentRuntime,
    ordersRuntime,
    identityAddress,
    paymentsAddress,
    ordersAddress,
    ordersSecret,
    ordersSchema: options.databaseUrl ? `orders_${suffix}` : undefined,
    paymentsGate,
    contentGate,
    async login(email, tenant = email.split("@")[1]!.split(".")[0]!) {
      const session = await identity.createSession({ tenantId: tenant, email, password: "demo-password" });
      return { authorization: `Bearer ${session.accessToken}` };
    },
    async stop() {
      identityChannel.close();
      paymentsChannel.close();
      ordersChannel.close();
      contentChannel.close();
      await ordersRuntime.stop();
      await paymentsGate?.close();
      await contentGate?.close();
      await contentRuntime.stop();
      await paymentsRuntime.stop();
      await identityRuntime.stop();
      rmSync(dataDir, { recursive: true, force: true });
      if (options.databaseUrl) {
        const client = new pg.Client(options.databaseUrl);
        await client.connect();
        await client.query(
          `DROP SCHEMA IF EXISTS identity_${suffix} CASCADE; DROP SCHEMA IF EXISTS payments_${suffix} CASCADE; DROP SCHEMA IF EXISTS orders_${suffix} CASCADE; DROP SCHEMA IF EXISTS content_${suffix} CASCADE`,
        );
        await client.end();
      }
    },
  };
}

/** The engines service suites run on: PGlite always, the PostgreSQL server when DATABASE_URL is set. */
export function serviceEngines(): { name: string; databaseUrl: string | undefined }[] {
  const engines: { name: string; databaseUrl: string | undefined }[] = [
    { name: "embedded PGlite", databaseUrl: undefined },
  ];
  if (process.env.DATABASE_URL) engines.push({ name: "PostgreSQL server", databaseUrl: process.env.DATABASE_URL });
  else console.log("  (PostgreSQL server service suites skipped: DATABASE_URL is not set)");
  return engines;
}
