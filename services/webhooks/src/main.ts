// Entrypoint of the webhooks process: the only place that reads the environment.
import { createLogger } from "@switchyard/platform/logger.js";
import { runMain } from "@switchyard/platform/server.js";
import { startWebhooksService, webhooksConfigFrom } from "./service.js";

runMain("webhooks", async () => {
  const config = webhooksConfigFrom(process.env);
  const runtime = await startWebhooksService(config, createLogger("webhooks", config.logLevel));
  return { stop: runtime.stop, launcherFd: config.launcherFd };
});
