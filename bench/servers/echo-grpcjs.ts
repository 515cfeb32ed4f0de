// EchoService on @grpc/grpc-js, through our own bootstrap (startGrpcServer + the adapter).
import { createLogger } from "@switchyard/platform/logger.js";
import { echoImpl, EchoService } from "@switchyard/platform/echo.js";
import { registration, startGrpcServer } from "@switchyard/platform/server.js";
import { serve } from "./child.js";

serve("echo-grpcjs", async () => {
  const server = await startGrpcServer({
    name: "bench-echo",
    host: "127.0.0.1",
    port: 0,
    logger: createLogger("bench-echo", "warn"),
    drainTimeoutMs: 1_000,
    services: [registration(EchoService, echoImpl())],
  });
  return { port: server.port, stop: () => server.shutdown() };
});
