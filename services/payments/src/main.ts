// Entrypoint of the payments process: the only place that reads the environment.
import { createLogger, runMain } from "@switchyard/platform";
import { paymentsConfigFrom, startPaymentsService } from "./service.js";

runMain("payments", async () => {
  const config = paymentsConfigFrom(process.env);
  const runtime = await startPaymentsService(config, createLogger("payments", config.logLevel));
  return runtime.stop;
});
