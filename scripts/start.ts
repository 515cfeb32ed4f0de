// `npm start`: the whole mesh on embedded storage with demo data, until Ctrl-C (or SIGTERM). Run by
// scripts/npm-start.mjs in the process npm started, once the bundles are built.
import { DEMO_PASSWORD, DEMO_USERS } from "@switchyard/identity/demo-data.js";
import { loadConfig, parse, setting, type ConfigOf } from "@switchyard/platform/config.js";
import { startMesh, type Mesh } from "./mesh.js";

/** The ports, as the services name them (0: any free one, printed when ready). */
const startSettings = {
  identity: setting("IDENTITY_PORT", parse.port, "identity's gRPC port", 50051),
  payments: setting("PAYMENTS_PORT", parse.port, "payments' gRPC port", 50052),
  orders: setting("ORDERS_PORT", parse.port, "orders' gRPC port", 50053),
  content: setting("CONTENT_PORT", parse.port, "content's gRPC port", 50054),
  webhooks: setting("WEBHOOKS_PORT", parse.port, "webhooks' gRPC port", 50055),
  gateway: setting("GATEWAY_PORT", parse.port, "the public API's port", 8080),
  identityMetrics: setting("IDENTITY_METRICS_PORT", parse.port, "identity's metrics port", 9461),
  paymentsMetrics: setting("PAYMENTS_METRICS_PORT", parse.port, "payments' metrics port", 9462),
  ordersMetrics: setting("ORDERS_METRICS_PORT", parse.port, "orders' metrics port", 9463),
  contentMetrics: setting("CONTENT_METRICS_PORT", parse.port, "content's metrics port", 9464),
  webhooksMetrics: setting("WEBHOOKS_METRICS_PORT", parse.port, "webhooks' metrics port", 9465),
};

/**
 * A signal this soon after the first is the same stop, not a second Ctrl-C: npm forwards the SIGINT
 * or SIGTERM it gets to this process, which the terminal (or a `kill` of the process group) has sent
 * here too. A person's second Ctrl-C comes later.
 */
const SAME_STOP_MS = 1_000;

function fail(err: unknown): never {
  process.stderr.write(`switchyard: could not start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}

/**
 * Runs the mesh until a signal stops it. It listens for signals before it first waits, so its caller
 * may let go of its own listener as soon as this returns its promise; `stopAsked`: a signal that came
 * before (the mesh is not started then).
 */
export async function runSwitchyard(stopAsked: string | undefined): Promise<void> {
  // The first signal stops the mesh in order (the edge first, identity last) — or, while it starts,
  // what has started; a second one at once. A signal nobody handled would end this process alone,
  // and the others, in process groups of their own, would run on.
  const starting = new AbortController();
  let mesh: Mesh | undefined;
  let stoppedAt: number | undefined;
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.on(signal, () => {
      if (stoppedAt !== undefined) {
        if (Date.now() - stoppedAt < SAME_STOP_MS) return;
        process.stdout.write("Switchyard: stopped at once.\n");
        process.exit(130); // the mesh's own exit hook kills what still runs
      }
      stoppedAt = Date.now();
      process.stdout.write("Switchyard: stopping… (Ctrl-C again: at once)\n");
      if (!mesh) return starting.abort(); // startMesh stops what it launched, and rejects (below)
      mesh.stop().then(
        () => {
          process.stdout.write("Switchyard: stopped.\n");
          process.exit(0);
        },
        () => process.exit(1),
      );
    });
  }
  if (stopAsked !== undefined) {
    process.stdout.write(`Switchyard: stopped before it started (${stopAsked}).\n`);
    process.exit(0);
  }

  let config: ConfigOf<typeof startSettings>;
  try {
    config = loadConfig(startSettings, process.env);
  } catch (err) {
    fail(err);
  }
  mesh = await startMesh({
    dataDir: process.env.DATA_DIR ?? "./data",
    demoData: true,
    output: "inherit",
    ports: {
      identity: config.identity,
      payments: config.payments,
      orders: config.orders,
      content: config.content,
      webhooks: config.webhooks,
      gateway: config.gateway,
    },
    // Prometheus metrics: the gateway at :8080/metrics, each service on its own port.
    metrics: {
      identity: config.identityMetrics,
      payments: config.paymentsMetrics,
      orders: config.ordersMetrics,
      content: config.contentMetrics,
      webhooks: config.webhooksMetrics,
    },
    // Embedded storage always: a DATABASE_URL exported in the shell is not where demo data goes.
    // Server reflection for grpcurl and buf curl: a local convenience, off everywhere else (deploy/).
    env: { LOG_LEVEL: process.env.LOG_LEVEL ?? "warn", DATABASE_URL: "", GRPC_REFLECTION: "true" },
    // Ctrl-C reaches this process alone, which stops the others in order (above).
    ownProcessGroup: true,
    signal: starting.signal,
  }).catch((err: unknown) => {
    if (!starting.signal.aborted) fail(err);
    process.stdout.write("Switchyard: stopped.\n");
    process.exit(0);
  });
  // A stop asked for just as the last part became ready: the mesh started all the same.
  if (starting.signal.aborted) {
    await mesh.stop();
    process.stdout.write("Switchyard: stopped.\n");
    process.exit(0);
  }

  const users = DEMO_USERS.map((u) => `${u.email} (${u.role}, tenant ${u.tenantId})`).join(", ");
  const { ports, metricsPorts, gatewayUrl } = mesh;
  const servicePorts = `identity :${ports.identity}, payments :${ports.payments}, orders :${ports.orders}, content :${ports.content}, webhooks :${ports.webhooks}`;
  const servicesMetrics = (["identity", "payments", "orders", "content", "webhooks"] as const).map(
    (n) => metricsPorts[n][0],
  );
  const metrics = `metrics at ${gatewayUrl}/metrics and :${servicesMetrics.join(", :")}/metrics`;
  const traces = process.env.OTEL_EXPORTER_OTLP_ENDPOINT
    ? `; traces to ${process.env.OTEL_EXPORTER_OTLP_ENDPOINT}`
    : "";
  // The gateway's root answers 404 (the API lives under /v1 and /v2): the page to open is the API reference.
  process.stdout.write(
    `Switchyard is ready at ${gatewayUrl}/docs (the API reference; the API is ${gatewayUrl}/v2/… and /v1/…; ${servicePorts}; ${metrics}${traces}) — demo users ${users}, password "${DEMO_PASSWORD}". Ctrl-C stops.\n`,
  );
}
