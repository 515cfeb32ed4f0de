// An initialised, empty PGlite cluster shipped beside this file (brotli-compressed tar), so that a
// new data directory starts from a copy instead of running initdb: initdb costs seconds of CPU per
// service and a second WASM instance whose memory stays with the process. The archive belongs to one
// PGlite version (in its name); with any other version installed, PGlite runs initdb as before.
// `npm run pglite-cluster` makes the archive for the installed version.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { brotliCompressSync, brotliDecompressSync, constants } from "node:zlib";
import { PGlite } from "@electric-sql/pglite";

// Resolved through the packages, not relative to this file: the same from the sources and from a bundle.
const require = createRequire(import.meta.url);

export function pgliteVersion(): string {
  const manifest = join(dirname(require.resolve("@electric-sql/pglite")), "..", "package.json");
  return (JSON.parse(readFileSync(manifest, "utf8")) as { version: string }).version;
}

/** The archive's file name for the installed PGlite (beside this file). */
export const clusterArchiveName = (): string => `pglite-${pgliteVersion()}-cluster.tar.br`;

/** The archive's path; undefined when there is none for the installed PGlite. */
export function clusterArchive(): string | undefined {
  try {
    return require.resolve(`@switchyard/platform/store/${clusterArchiveName()}`);
  } catch {
    return undefined;
  }
}

function clusterTar(): Buffer | undefined {
  const path = clusterArchive();
  // One output chunk (the tar is 40 MB): freed whole, it goes back to the system.
  return path === undefined ? undefined : brotliDecompressSync(readFileSync(path), { chunkSize: 64 * 1024 * 1024 });
}

/** The shipped cluster as PGlite's `loadDataDir` takes it (in memory); undefined when none fits the installed PGlite. */
export function initialisedCluster(): Blob | undefined {
  const tar = clusterTar();
  return tar && new Blob([tar]);
}

/**
 * Makes `dataDir` a copy of the shipped cluster unless it holds one already (PG_VERSION, written
 * last: an interrupted copy is made again). Leaves it empty, for initdb, when no archive fits.
 */
export function seedDataDir(dataDir: string): void {
  if (existsSync(join(dataDir, "PG_VERSION"))) return;
  const tar = clusterTar();
  if (!tar) return;
  // The archive is PGlite's own dump: a ustar of directories and regular files, paths under 100 bytes.
  let version: Buffer | undefined;
  for (let at = 0; at + 512 <= tar.length;) {
    const field = (from: number, length: number) =>
      tar.toString("latin1", at + from, at + from + length).replace(/\0.*$/s, "");
    const name = field(0, 100);
    if (!name) break;
    const size = parseInt(field(124, 12).trim() || "0", 8);
    const type = field(156, 1) || "0";
    const path = join(dataDir, name);
    const content = tar.subarray(at + 512, at + 512 + size);
    if (type === "5") mkdirSync(path, { recursive: true, mode: 0o700 });
    else if (type !== "0") throw new Error(`unexpected entry ${name} (type ${type}) in ${clusterArchive()}`);
    else if (name.replace(/^\//, "") === "PG_VERSION") version = content;
    else writeFileSync(path, content, { mode: 0o600 });
    at += 512 + Math.ceil(size / 512) * 512;
  }
  if (!version) throw new Error(`no PG_VERSION in ${clusterArchive()}`);
  writeFileSync(join(dataDir, "PG_VERSION"), version, { mode: 0o600 });
}

/** Runs initdb (in memory) and returns the cluster as an archive for `initialisedCluster`. */
export async function makeClusterArchive(): Promise<Buffer> {
  const db = await PGlite.create();
  try {
    const tar = Buffer.from(await (await db.dumpDataDir("none")).arrayBuffer());
    return brotliCompressSync(tar, {
      params: {
        [constants.BROTLI_PARAM_QUALITY]: 9,
        [constants.BROTLI_PARAM_LGWIN]: 24,
        [constants.BROTLI_PARAM_SIZE_HINT]: tar.length,
      },
    });
  } finally {
    await db.close();
  }
}
