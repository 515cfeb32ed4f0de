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
}).catch((err: unknown) => {
  process.stderr.write(`switchyard: could not start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});

const users = DEMO_USERS.map((u) => `${u.email} (${u.role}, tenant ${u.tenantId})`).join(", ");
process.stdout.write(
  `Switchyard is ready at ${mesh.gatewayUrl} (identity :${mesh.ports.identity}, payments :${mesh.ports.payments}, orders :${mesh.ports.orders}, content :${mesh.ports.content}; metrics at ${mesh.gatewayUrl}/metrics and :${Object.values(METRICS_PORTS).join(", :")}/metrics${process.env.OTEL_EXPORTER_OTLP_ENDPOINT ? `; traces to ${process.env.OTEL_EXPORTER_OTLP_ENDPOINT}` : ""}) — demo users ${users}, password "${DEMO_PASSWORD}". Ctrl-C stops.\n`,
);

let stopping = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    process.stdout.write("Switchyard: stopping…\n");
    mesh.stop().then(() => process.exit(0), () => process.exit(1));
  });
}
