// Mocha global setup: every mesh a test starts runs the bundles in dist/ (as production does), built
// here once from the current sources before any test runs.
import { buildAll } from "../../scripts/build.mjs";

export async function mochaGlobalSetup(): Promise<void> {
  await buildAll();
}
