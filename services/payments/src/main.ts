// Entrypoint of the payments process: the only place that reads the environment.
import { createLogger } from "@switchyard/platform/logger.js";
import { runMain } from "@switchyard/platform/server.js";
import { paymentsConfigFrom, startPaymentsService } from "./service.js";

runMain("payments", async () => {
  const config = paymentsConfigFrom(process.env);
  const runtime = await startPaymentsService(config, createLogger("payments", config.logLevel));
  return { stop: runtime.stop, launcherFd: config.launcherFd };
});
