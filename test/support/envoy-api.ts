// Envoy's own API, for reading deploy/envoy/envoy.yaml as Envoy would without an Envoy binary.
//
// The envoy-api protos (with the xds, googleapis and protoc-gen-validate protos they import) ship
// inside the `@grpc/grpc-js-xds` package. This builds them with buf, offline, into a descriptor set:
// every envoy/**/v3 file whose imports the package holds (a few tracing and metrics files import
// opencensus/opentelemetry/prometheus protos it does not ship; nothing in our config uses them), plus
// everything those files import. One fix is needed first: the bundled validate.proto predates the
// `ignore_empty` string rule that some envoy protos use, so a copy of it gets that field (number 26,
// as in protoc-gen-validate upstream) unless it already has it.
//
// protobuf-es then reads YAML-as-JSON into envoy.config.bootstrap.v3.Bootstrap with that registry:
// unknown fields are errors, every value must have its field's type, and each Any's "@type" (every
// typed_config) must name a message in the registry, whose fields are checked the same way.
import { spawnSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createFileRegistry, fromBinary, type FileRegistry } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";

const require = createRequire(import.meta.url);

export interface EnvoyApi {
  registry: FileRegistry;
  /** .proto files built (the envoy v3 files and their imports). */
  files: number;
  /** envoy v3 files left out because an import is not shipped, with the first missing import. */
  leftOut: string[];
  /** how long building took */
  ms: number;
}

let built: EnvoyApi | undefined;

export function envoyApi(): EnvoyApi {
  built ??= build();
  return built;
}

function build(): EnvoyApi {
  const started = Date.now();
  const packageDir = dirname(require.resolve("@grpc/grpc-js-xds/package.json"));
  const deps = join(packageDir, "deps");
  const roots = ["envoy-api", "xds", "googleapis", "protoc-gen-validate"].map((r) => join(deps, r));
  for (const r of roots) if (!existsSync(r)) throw new Error(`@grpc/grpc-js-xds no longer ships ${r}`);

  const locate = (file: string) => roots.map((r) => join(r, file)).find(existsSync);
  const isWellKnown = (file: string) => file.startsWith("google/protobuf/"); // buf has these built in
  const imports = new Map<string, string[] | undefined>();
  const importsOf = (file: string) => {
    if (!imports.has(file)) {
      const path = locate(file);
      imports.set(
        file,
        path
          ? [...readFileSync(path, "utf8").matchAll(/^import\s+(?:public\s+|weak\s+)?"([^"]+)";/gm)].map((m) => m[1]!)
          : undefined,
      );
    }
    return imports.get(file);
  };
  /** The first import (transitively) that is not shipped, or undefined when all are. */
  const missing = new Map<string, string | undefined>();
  const firstMissing = (file: string, stack = new Set<string>()): string | undefined => {
    if (isWellKnown(file) || stack.has(file)) return undefined;
    if (missing.has(file)) return missing.get(file);
    stack.add(file);
    const list = importsOf(file);
    const result = list === undefined ? file : list.map((i) => firstMissing(i, stack)).find((m) => m !== undefined);
    stack.delete(file);
    missing.set(file, result);
    return result;
  };

  const envoyFiles: string[] = [];
  const walk = (dir: string, rel: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(dir, e.name), `${rel}/${e.name}`);
      else if (e.name.endsWith(".proto") && /\/v3\//.test(`${rel}/`)) envoyFiles.push(`${rel}/${e.name}`);
    }
  };
  walk(join(deps, "envoy-api", "envoy"), "envoy");
  const wanted = envoyFiles.filter((f) => firstMissing(f) === undefined);
  const leftOut = envoyFiles.filter((f) => firstMissing(f) !== undefined).map((f) => `${f} (needs ${firstMissing(f)})`);
  if (!wanted.includes("envoy/config/bootstrap/v3/bootstrap.proto"))
    throw new Error(`bootstrap.proto cannot be built: ${leftOut.join(", ")}`);

  const closure = new Set<string>();
  const add = (file: string) => {
    if (isWellKnown(file) || closure.has(file)) return;
    closure.add(file);
    for (const i of importsOf(file) ?? []) add(i);
  };
  wanted.forEach(add);

  const work = mkdtempSync(join(tmpdir(), "envoy-api-"));
  try {
    for (const file of closure) {
      mkdirSync(dirname(join(work, "proto", file)), { recursive: true });
      copyFileSync(locate(file)!, join(work, "proto", file));
    }
    const validate = join(work, "proto", "validate", "validate.proto");
    const text = readFileSync(validate, "utf8");
    if (!/\bignore_empty\s*=\s*26\b/.test(text)) {
      const strict = /^(\s*optional bool strict = 25 \[default = true\];)$/m;
      if (!strict.test(text))
        throw new Error("validate.proto: StringRules.strict (25) not found; cannot add ignore_empty (26)");
      writeFileSync(validate, text.replace(strict, "$1\n  optional bool ignore_empty = 26;"));
    }
    writeFileSync(join(work, "buf.yaml"), "version: v2\nmodules:\n  - path: proto\n");
    const out = join(work, "envoy.binpb");
    const buf = join(dirname(require.resolve("@bufbuild/buf/package.json")), "bin", "buf");
    const run = spawnSync(buf, ["build", "--exclude-source-info", "-o", out], {
      cwd: work,
      encoding: "utf8",
      timeout: 60_000,
    });
    if (run.error) throw run.error;
    if (run.status !== 0) throw new Error(`buf build of the envoy-api protos failed:\n${run.stderr}`);
    const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(out)));
    return { registry, files: closure.size, leftOut, ms: Date.now() - started };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
