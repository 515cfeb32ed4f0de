// Entrypoint of the gateway process: the only place that reads the environment.
import { createLogger } from "@switchyard/platform/logger.js";
import { runMain } from "@switchyard/platform/server.js";
import { startGateway } from "./gateway.js";
import { gatewayConfigFrom } from "./settings.js";

runMain("gateway", async () => {
  const config = gatewayConfigFrom(process.env);
  const gateway = await startGateway(config, createLogger("gateway", config.logLevel));
  return { stop: gateway.stop, launcherFd: config.launcherFd };
});
