// Entrypoint of the content process: the only place that reads the environment.
import { createLogger, runMain } from "@switchyard/platform";
import { contentConfigFrom, startContentService } from "./service.js";

runMain("content", async () => {
  const config = contentConfigFrom(process.env);
  const runtime = await startContentService(config, createLogger("content", config.logLevel));
  return runtime.stop;
});
