// `npm run pglite-cluster`: makes the initialised PGlite cluster that new embedded databases start
// from (services/platform/src/store/pglite-<version>-cluster.tar.br) for the installed PGlite, and
// removes the archives of other versions. Run it after upgrading @electric-sql/pglite.
import { readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { clusterArchiveName, makeClusterArchive } from "@switchyard/platform/store/pglite-cluster.js";

const dir = fileURLToPath(new URL("../services/platform/src/store/", import.meta.url));
for (const name of readdirSync(dir)) if (/^pglite-.*-cluster\.tar\.br$/.test(name)) rmSync(join(dir, name));
const path = join(dir, clusterArchiveName());
writeFileSync(path, await makeClusterArchive());
process.stdout.write(`wrote ${path}\n`);
