// `npm start`: the whole mesh on embedded storage with demo data, until Ctrl-C.
import { DEMO_PASSWORD, DEMO_USERS } from "@switchyard/identity/demo-data.js";
import { startMesh } from "./mesh.js";

const METRICS_PORTS = { identity: 9461, payments: 9462, orders: 9463, content: 9464 } as const;

const mesh = await startMesh({
  dataDir: process.env.DATA_DIR ?? "./data",
  demoData: true,
  output: "inherit",
  ports: { identity: 50051, payments: 50052, orders: 50053, content: 50054, gateway: 8080 },
  // Prometheus metrics: the gateway at :8080/metrics, each service on its own port.
  metrics: METRICS_PORTS,
  // Embedded storage always: a DATABASE_URL exported in the shell is not where demo data goes.
  // Server reflection for grpcurl and buf curl: a local convenience, off everywhere else (deploy/).
  env: { LOG_LEVEL: process.env.LOG_LEVEL ?? "warn", DATABASE_URL: "", GRPC_REFLECTION: "true" },
  // Ctrl-C reaches this process alone, which stops the others in order (below).
  ownProcessGroup: true,
}).catch((err: unknown) => {
  process.stderr.write(`switchyard: could not start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});

const users = DEMO_USERS.map((u) => `${u.email} (${u.role}, tenant ${u.tenantId})`).join(", ");
const ports = `identity :${mesh.ports.identity}, payments :${mesh.ports.payments}, orders :${mesh.ports.orders}, content :${mesh.ports.content}`;
const metrics = `metrics at ${mesh.gatewayUrl}/metrics and :${Object.values(METRICS_PORTS).join(", :")}/metrics`;
const traces = process.env.OTEL_EXPORTER_OTLP_ENDPOINT ? `; traces to ${process.env.OTEL_EXPORTER_OTLP_ENDPOINT}` : "";
// The gateway's root answers 404 (the API lives under /v1 and /v2): the page to open is the API reference.
process.stdout.write(
  `Switchyard is ready at ${mesh.gatewayUrl}/docs (the API reference; the API is ${mesh.gatewayUrl}/v2/… and /v1/…; ${ports}; ${metrics}${traces}) — demo users ${users}, password "${DEMO_PASSWORD}". Ctrl-C stops.\n`,
);

// The first signal stops the mesh in order (the edge first, identity last); a second one at once.
let stopping = false;
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(signal, () => {
    if (stopping) {
      process.stdout.write("Switchyard: stopped at once.\n");
      process.exit(130); // the mesh's own exit hook kills what still runs
    }
    stopping = true;
    process.stdout.write("Switchyard: stopping… (Ctrl-C again: at once)\n");
    mesh.stop().then(
      () => {
        process.stdout.write("Switchyard: stopped.\n");
        process.exit(0);
      },
      () => process.exit(1),
    );
  });
}
