// `npm run build`: one JavaScript bundle per process in dist/ (with source maps), so production runs
// plain `node dist/<process>.js`. Our own workspaces (gen, platform, the services, the gateway) are
// bundled; every third-party package stays an import from node_modules (installed with
// `npm ci --omit=dev`). Plain JavaScript, so it runs before anything is compiled.
//
// Files are written beside their final names and renamed into place, so a process starting meanwhile
// (another test run in the same checkout) never reads half a bundle.
import { build } from "esbuild";
import { parse as parseYaml } from "yaml";
import { readFileSync, renameSync, rmSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { basename, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
export const OUT_DIR = join(ROOT, "dist");

/** Process name → entry point. */
export const ENTRIES = {
  identity: "services/identity/src/main.ts",
  payments: "services/payments/src/main.ts",
  orders: "services/orders/src/main.ts",
  content: "services/content/src/main.ts",
  webhooks: "services/webhooks/src/main.ts",
  gateway: "gateway/src/main.ts",
  start: "scripts/start.ts",
  admin: "scripts/admin.ts",
  migrate: "scripts/migrate.ts",
};

/**
 * Third-party packages stay imports, and only runtime dependencies may be imported: a process that
 * imports a devDependency fails the build (the image installs `--omit=dev`).
 */
function runtimeDependenciesOnly(dependencies) {
  const packageOf = (path) =>
    path
      .split("/")
      .slice(0, path.startsWith("@") ? 2 : 1)
      .join("/");
  return {
    name: "runtime-dependencies-only",
    setup(b) {
      b.onResolve({ filter: /^[^./]/ }, (args) => {
        if (args.path.startsWith("node:") || builtinModules.includes(args.path)) return { external: true };
        if (args.path.startsWith("@switchyard/")) return undefined; // ours: bundled
        if (dependencies.includes(packageOf(args.path))) return { external: true };
        return {
          errors: [{ text: `${packageOf(args.path)} is imported at run time but is not a dependency in package.json` }],
        };
      });
    },
  };
}

/** Per bundle (by file name): the source files in it and the packages it imports at run time. */
function bundleContents(metafile) {
  const contents = {};
  for (const [output, info] of Object.entries(metafile.outputs)) {
    if (!output.endsWith(".js")) continue;
    contents[basename(output)] = {
      sources: Object.keys(info.inputs)
        .map((input) => relative(ROOT, join(ROOT, input)))
        .sort(),
      imports: [...new Set(info.imports.filter((i) => i.external).map((i) => i.path))].sort(),
    };
  }
  return contents;
}

export async function buildAll() {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
  // A sibling of dist/, so the source maps' relative paths stay right after the move.
  const staging = join(ROOT, `.dist-staging-${process.pid}-${Date.now()}`);
  mkdirSync(staging, { recursive: true });
  try {
    const result = await build({
      absWorkingDir: ROOT,
      entryPoints: Object.fromEntries(Object.entries(ENTRIES).map(([name, entry]) => [name, join(ROOT, entry)])),
      outdir: staging,
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20.19",
      sourcemap: true,
      plugins: [runtimeDependenciesOnly(Object.keys(pkg.dependencies))],
      logLevel: "warning",
      // What went into each bundle (dist/meta.json): tests read it to hold package boundaries.
      metafile: true,
      banner: { js: "// Built by scripts/build.mjs from the TypeScript sources; do not edit." },
    });
    // The gateway's documents as JSON beside its bundle: JSON.parse at start instead of a YAML parser.
    mkdirSync(join(staging, "openapi"));
    for (const file of readdirSync(join(ROOT, "gateway", "openapi")).filter((f) => /^v\d+\.yaml$/.test(f))) {
      writeFileSync(
        join(staging, "openapi", file.replace(/\.yaml$/, ".json")),
        JSON.stringify(parseYaml(readFileSync(join(ROOT, "gateway", "openapi", file), "utf8"))),
      );
    }
    writeFileSync(join(staging, "meta.json"), JSON.stringify(bundleContents(result.metafile), null, 1));
    mkdirSync(join(OUT_DIR, "openapi"), { recursive: true });
    // Each file replaced by a rename, which is atomic: a process starting from dist/ while another
    // build runs (npm start beside the tests) reads the old file or the new one, never none or half.
    const documents = readdirSync(join(staging, "openapi"));
    for (const file of documents) renameSync(join(staging, "openapi", file), join(OUT_DIR, "openapi", file));
    for (const file of readdirSync(join(OUT_DIR, "openapi")))
      if (!documents.includes(file)) rmSync(join(OUT_DIR, "openapi", file), { force: true });
    for (const file of readdirSync(staging))
      if (file !== "openapi") renameSync(join(staging, file), join(OUT_DIR, file));
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}

/** What a build wrote, and how long it took since `started` (Date.now()), as one line. */
export function builtLine(started) {
  return `built ${Object.keys(ENTRIES)
    .map((n) => `dist/${n}.js`)
    .join(", ")} in ${Date.now() - started} ms\n`;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const started = Date.now();
  await buildAll();
  if (!process.argv.includes("--quiet")) process.stdout.write(builtLine(started));
}
