// Entrypoint of the content process: the only place that reads the environment.
import { createLogger } from "@switchyard/platform/logger.js";
import { runMain } from "@switchyard/platform/server.js";
import { contentConfigFrom, startContentService } from "./service.js";

runMain("content", async () => {
  const config = contentConfigFrom(process.env);
  const runtime = await startContentService(config, createLogger("content", config.logLevel));
  return { stop: runtime.stop, launcherFd: config.launcherFd };
});
