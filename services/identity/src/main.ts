// Entrypoint of the identity process: the only place that reads the environment.
import { createLogger } from "@switchyard/platform/logger.js";
import { runMain } from "@switchyard/platform/server.js";
import { identityConfigFrom, startIdentityService } from "./service.js";

runMain("identity", async () => {
  const config = identityConfigFrom(process.env);
  const runtime = await startIdentityService(config, createLogger("identity", config.logLevel));
  return { stop: runtime.stop, launcherFd: config.launcherFd };
});
