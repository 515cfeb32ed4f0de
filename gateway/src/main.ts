// Entrypoint of the gateway process: the only place that reads the environment.
import { createLogger, runMain } from "@switchyard/platform";
import { gatewayConfigFrom, startGateway } from "./gateway.js";

runMain("gateway", async () => {
  const config = gatewayConfigFrom(process.env);
  const gateway = await startGateway(config, createLogger("gateway", config.logLevel));
  return gateway.stop;
});
