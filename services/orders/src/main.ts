// Entrypoint of the orders process: the only place that reads the environment.
import { createLogger } from "@switchyard/platform/logger.js";
import { runMain } from "@switchyard/platform/server.js";
import { ordersConfigFrom, startOrdersService } from "./service.js";

runMain("orders", async () => {
  const config = ordersConfigFrom(process.env);
  const runtime = await startOrdersService(config, createLogger("orders", config.logLevel));
  return { stop: runtime.stop, launcherFd: config.launcherFd };
});
