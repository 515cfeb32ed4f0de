// Renders a kustomization to its Kubernetes objects, offline.
//
// With `kubectl` (kustomize v4 or later built in) on PATH, `kubectl kustomize` renders it. Without, a
// small renderer here does: it implements exactly the kustomize features deploy/k8s uses — resources,
// components, ConfigMap and Secret generators (files and literals; names suffixed with kustomize's
// content hash, references to them renamed), JSON 6902 patches with targets (kind, name, label
// selector), labels, images, namespace — in kustomize's order, and refuses any other field, so a
// kustomization it cannot render fails the test instead of rendering wrong. Where kubectl is present the tests also hold the two renderings
// equal, object for object, so the small renderer stays true to kustomize.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { parse as parseYaml, parseAllDocuments } from "yaml";

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [key: string]: unknown };
  [key: string]: unknown;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

// ---- kubectl ----------------------------------------------------------------------------------------

let kubectlState: { usable: boolean; why: string } | undefined;

/** Whether `kubectl kustomize` can render components (kustomize v4+), and why not. */
export function kubectlKustomize(): { usable: boolean; why: string } {
  if (kubectlState) return kubectlState;
  const version = spawnSync("kubectl", ["version", "--client", "-o", "json"], { encoding: "utf8", timeout: 20_000 });
  if (version.error) {
    kubectlState = {
      usable: false,
      why: `kubectl is not installed (${(version.error as NodeJS.ErrnoException).code ?? version.error.message})`,
    };
  } else if (version.status !== 0) {
    kubectlState = { usable: false, why: `kubectl version failed: ${version.stderr.trim()}` };
  } else {
    const kustomize = String((JSON.parse(version.stdout) as { kustomizeVersion?: string }).kustomizeVersion ?? "");
    const major = Number(/^v?(\d+)\./.exec(kustomize)?.[1] ?? 0);
    kubectlState =
      major >= 4
        ? { usable: true, why: `kubectl with kustomize ${kustomize}` }
        : { usable: false, why: `kubectl's kustomize (${kustomize || "unknown"}) predates components (v4+)` };
  }
  return kubectlState;
}

export function renderWithKubectl(dir: string): K8sObject[] {
  const built = spawnSync("kubectl", ["kustomize", dir], {
    encoding: "utf8",
    timeout: 30_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  if (built.error) throw built.error;
  if (built.status !== 0) throw new Error(`kubectl kustomize ${dir} failed: ${built.stderr}`);
  // kubectl writes a long base64 value in lines; the API server's decoder skips the line breaks.
  return parseObjects(built.stdout, `kubectl kustomize ${dir}`).map((o) => {
    const data = o.kind === "Secret" ? (o as { data?: Record<string, string> }).data : undefined;
    for (const key of Object.keys(data ?? {})) data![key] = data![key]!.replace(/\s+/g, "");
    return o;
  });
}

/** kubectl when it can, else the renderer below; `how` says which. */
export function render(dir: string): { objects: K8sObject[]; how: string } {
  const kubectl = kubectlKustomize();
  if (kubectl.usable) return { objects: renderWithKubectl(dir), how: kubectl.why };
  return { objects: renderLite(dir), how: `the test's own kustomize renderer (${kubectl.why})` };
}

function parseObjects(text: string, what: string): K8sObject[] {
  return parseAllDocuments(text)
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(`${what}: ${doc.errors.map((e) => e.message).join("; ")}`);
      return doc.toJS() as K8sObject | null;
    })
    .filter((o): o is K8sObject => o !== null);
}

// ---- the small renderer -----------------------------------------------------------------------------

const KUSTOMIZATION_FIELDS = new Set([
  "apiVersion",
  "kind",
  "resources",
  "components",
  "configMapGenerator",
  "secretGenerator",
  "patches",
  "labels",
  "images",
  "namespace",
]);
const GENERATOR_FIELDS = new Set(["name", "files", "literals", "type", "options"]);

interface Target {
  kind?: string;
  name?: string;
  namespace?: string;
  labelSelector?: string;
}
interface Kustomization {
  apiVersion?: string;
  kind?: string;
  resources?: string[];
  components?: string[];
  patches?: { path?: string; patch?: string; target?: Target }[];
  labels?: { pairs: Record<string, string>; includeSelectors?: boolean; includeTemplates?: boolean }[];
  images?: { name: string; newName?: string; newTag?: string; digest?: string }[];
  namespace?: string;
  configMapGenerator?: Generator[];
  secretGenerator?: Generator[];
}
interface Generator {
  name: string;
  /** `path` (the key is the file's name) or `key=path` */
  files?: string[];
  /** `key=value` */
  literals?: string[];
  type?: string;
  /** disableNameSuffixHash: the object keeps its given name; labels: the object's. */
  options?: { disableNameSuffixHash?: boolean; labels?: Record<string, string> };
}

function readKustomization(dir: string, expectKind: "Kustomization" | "Component"): Kustomization {
  const file = ["kustomization.yaml", "kustomization.yml", "Kustomization"].map((f) => join(dir, f)).find(existsSync);
  if (!file) throw new Error(`${dir}: no kustomization.yaml`);
  const k = parseYaml(readFileSync(file, "utf8")) as Kustomization;
  const kind = k.kind ?? "Kustomization";
  if (kind !== expectKind) throw new Error(`${file}: a ${kind} where a ${expectKind} is expected`);
  for (const field of Object.keys(k)) {
    if (!KUSTOMIZATION_FIELDS.has(field))
      throw new Error(
        `${file}: the test's kustomize renderer does not implement "${field}" (install kubectl, or extend test/support/kustomize.ts)`,
      );
  }
  return k;
}

export function renderLite(dir: string): K8sObject[] {
  return build(resolve(dir), "Kustomization", []);
}

function build(dir: string, kind: "Kustomization" | "Component", accumulated: K8sObject[]): K8sObject[] {
  const k = readKustomization(dir, kind);
  const objects = accumulated;
  for (const r of k.resources ?? []) {
    const path = join(dir, r);
    if (!existsSync(path)) throw new Error(`${dir}: resource ${r} does not exist`);
    if (statSync(path).isDirectory()) objects.push(...build(path, "Kustomization", []));
    else objects.push(...parseObjects(readFileSync(path, "utf8"), path).map((o) => structuredClone(o)));
  }
  // The kustomization's own generators, then its components (kustomize runs them in this order).
  for (const g of k.configMapGenerator ?? []) objects.push(generate(dir, g, "ConfigMap"));
  for (const g of k.secretGenerator ?? []) objects.push(generate(dir, g, "Secret"));
  // A component works on everything accumulated so far: its resources join, then its transformers run.
  for (const c of k.components ?? []) build(join(dir, c), "Component", objects);
  // kustomize's order of the built-in transformers used here.
  for (const p of k.patches ?? []) applyPatch(dir, p, objects);
  if (k.namespace) for (const o of objects) if (!CLUSTER_SCOPED.has(o.kind)) o.metadata.namespace = k.namespace;
  for (const l of k.labels ?? []) applyLabels(l, objects);
  for (const image of k.images ?? []) for (const o of objects) setImages(o as unknown as Json, image);
  renameReferences(objects);
  checkUnique(objects, dir);
  return objects;
}

// ---- generators -------------------------------------------------------------------------------------

/** Generated objects and the name their references use (kustomize renames those to the hashed one). */
const generatedFrom = new WeakMap<K8sObject, string>();

function generate(dir: string, g: Generator, kind: "ConfigMap" | "Secret"): K8sObject {
  for (const field of Object.keys(g)) {
    if (!GENERATOR_FIELDS.has(field) || (field === "type" && kind !== "Secret"))
      throw new Error(`${dir}: the test's kustomize renderer does not implement ${kind} generator field "${field}"`);
  }
  for (const option of Object.keys(g.options ?? {})) {
    if (option !== "disableNameSuffixHash" && option !== "labels")
      throw new Error(`${dir}: the test's kustomize renderer does not implement generator option "${option}"`);
  }
  const data: Record<string, string> = {};
  const put = (key: string, value: string) => {
    if (key in data) throw new Error(`${dir}: ${kind} ${g.name} has key ${key} twice`);
    data[key] = kind === "Secret" ? Buffer.from(value, "utf8").toString("base64") : value;
  };
  for (const f of g.files ?? []) {
    const [key, path] = f.includes("=") ? [f.slice(0, f.indexOf("=")), f.slice(f.indexOf("=") + 1)] : [basename(f), f];
    const file = resolve(dir, path);
    // kustomize's load restrictor: a kustomization reads no file outside its own directory.
    if (!file.startsWith(`${resolve(dir)}/`)) throw new Error(`${dir}: ${f} is outside the kustomization's directory`);
    put(key, readFileSync(file, "utf8"));
  }
  for (const l of g.literals ?? []) {
    const at = l.indexOf("=");
    if (at <= 0) throw new Error(`${dir}: literal "${l.split("=")[0]}" of ${kind} ${g.name} is not key=value`);
    put(l.slice(0, at), l.slice(at + 1));
  }
  const content = kind === "Secret" ? { kind, type: g.type ?? "Opaque", name: "", data } : { kind, name: "", data };
  const name = g.options?.disableNameSuffixHash ? g.name : `${g.name}-${contentHash(content)}`;
  const metadata = g.options?.labels ? { name, labels: { ...g.options.labels } } : { name };
  const object = (
    kind === "Secret"
      ? { apiVersion: "v1", kind, metadata, type: g.type ?? "Opaque", data }
      : { apiVersion: "v1", kind, metadata, data }
  ) as K8sObject;
  generatedFrom.set(object, g.name);
  return object;
}

/**
 * kustomize's name suffix: the first 10 hex digits of the SHA-256 of the object's kind, type, data and
 * name as Go's json.Marshal writes them (keys sorted, <>& escaped), with 0 1 3 a e spelled g h k m t.
 * (Its hasher looks the name up under a key that does not exist, so the name it hashes is always "".)
 */
function contentHash(content: object): string {
  const goJson = (v: unknown): string =>
    v !== null && typeof v === "object"
      ? `{${Object.keys(v)
          .sort()
          .map((k) => `${JSON.stringify(k)}:${goJson((v as Record<string, unknown>)[k])}`)
          .join(",")}}`
      : JSON.stringify(v)
          .replace(/</g, "\\u003c")
          .replace(/>/g, "\\u003e")
          .replace(/&/g, "\\u0026")
          .replace(/\u2028/g, "\\u2028")
          .replace(/\u2029/g, "\\u2029");
  const hex = createHash("sha256").update(goJson(content)).digest("hex");
  return [...hex.slice(0, 10)].map((c) => ({ "0": "g", "1": "h", "3": "k", a: "m", e: "t" })[c] ?? c).join("");
}

/** Every reference to a generated ConfigMap or Secret by its given name now names the generated one. */
function renameReferences(objects: K8sObject[]): void {
  const renamed = { ConfigMap: new Map<string, string>(), Secret: new Map<string, string>() };
  for (const o of objects) {
    const original = generatedFrom.get(o);
    if (original !== undefined) renamed[o.kind as "ConfigMap" | "Secret"].set(original, o.metadata.name);
  }
  if (renamed.ConfigMap.size + renamed.Secret.size === 0) return;
  // Where a pod names a ConfigMap or a Secret: the key that holds the reference, and the field with the name.
  const references: Record<string, ["ConfigMap" | "Secret", string]> = {
    configMap: ["ConfigMap", "name"],
    configMapKeyRef: ["ConfigMap", "name"],
    configMapRef: ["ConfigMap", "name"],
    secret: ["Secret", "secretName"],
    secretKeyRef: ["Secret", "name"],
    secretRef: ["Secret", "name"],
  };
  const walk = (node: Json, inProjected: boolean): void => {
    if (Array.isArray(node)) return node.forEach((n) => walk(n, inProjected));
    if (node === null || typeof node !== "object") return;
    for (const [key, value] of Object.entries(node)) {
      const reference = references[key];
      if (reference && value && typeof value === "object" && !Array.isArray(value)) {
        // A projected volume's secret source names it `name`, a secret volume `secretName`.
        const field = key === "secret" && inProjected ? "name" : reference[1];
        const name = value[field];
        const to = typeof name === "string" ? renamed[reference[0]].get(name) : undefined;
        if (to !== undefined) value[field] = to;
      }
      walk(value, inProjected || key === "projected");
    }
  };
  for (const o of objects) if (!generatedFrom.has(o)) walk(o as unknown as Json, false);
}

const CLUSTER_SCOPED = new Set([
  "Namespace",
  "ClusterRole",
  "ClusterRoleBinding",
  "CustomResourceDefinition",
  "PriorityClass",
  "StorageClass",
  "PersistentVolume",
]);
const POD_TEMPLATES = new Set(["Deployment", "ReplicaSet", "DaemonSet", "StatefulSet", "Job", "ReplicationController"]);

function checkUnique(objects: K8sObject[], where: string): void {
  const seen = new Set<string>();
  for (const o of objects) {
    const id = objectId(o);
    if (seen.has(id)) throw new Error(`${where}: ${id} appears twice`);
    seen.add(id);
  }
}

export function objectId(o: K8sObject): string {
  return `${o.apiVersion}/${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`;
}

function applyLabels(l: NonNullable<Kustomization["labels"]>[number], objects: K8sObject[]): void {
  if (l.includeSelectors)
    throw new Error("labels with includeSelectors: not implemented by the test's kustomize renderer");
  for (const o of objects) {
    o.metadata.labels = { ...(o.metadata.labels ?? {}), ...l.pairs };
    if (l.includeTemplates && POD_TEMPLATES.has(o.kind)) {
      const template = ((o.spec as JsonObject | undefined)?.template ?? undefined) as JsonObject | undefined;
      if (template) {
        const metadata = (template.metadata ??= {}) as JsonObject;
        metadata.labels = { ...((metadata.labels as Record<string, string> | undefined) ?? {}), ...l.pairs };
      }
    }
    // kustomize labels a StatefulSet's volume claim templates as it labels its pod template.
    if (l.includeTemplates && o.kind === "StatefulSet") {
      for (const claim of ((o.spec as JsonObject | undefined)?.volumeClaimTemplates ?? []) as JsonObject[]) {
        const metadata = (claim.metadata ??= {}) as JsonObject;
        metadata.labels = { ...((metadata.labels as Record<string, string> | undefined) ?? {}), ...l.pairs };
      }
    }
    if (l.includeTemplates && o.kind === "CronJob")
      throw new Error("labels on a CronJob: not implemented by the test's kustomize renderer");
  }
}

function setImages(node: Json, image: NonNullable<Kustomization["images"]>[number]): void {
  if (Array.isArray(node)) return node.forEach((n) => setImages(n, image));
  if (node === null || typeof node !== "object") return;
  for (const [key, value] of Object.entries(node)) {
    if ((key === "containers" || key === "initContainers") && Array.isArray(value)) {
      for (const c of value) {
        if (c && typeof c === "object" && !Array.isArray(c) && typeof c.image === "string")
          c.image = retag(c.image, image);
      }
    } else setImages(value, image);
  }
}

function retag(current: string, image: NonNullable<Kustomization["images"]>[number]): string {
  const m = /^(.*?)(?::([\w][\w.-]*))?(?:@(sha256:[a-f0-9]+))?$/.exec(current)!;
  const [, name = "", tag, digest] = m;
  if (name !== image.name) return current;
  const newName = image.newName ?? name;
  if (image.digest) return `${newName}@${image.digest}`;
  if (image.newTag) return `${newName}:${image.newTag}`;
  return `${newName}${tag ? `:${tag}` : ""}${digest ? `@${digest}` : ""}`;
}

// ---- patches ----------------------------------------------------------------------------------------

interface Operation {
  op: string;
  path: string;
  value?: Json;
}

function applyPatch(dir: string, p: NonNullable<Kustomization["patches"]>[number], objects: K8sObject[]): void {
  const text = p.path !== undefined ? readFileSync(join(dir, p.path), "utf8") : p.patch;
  if (text === undefined) throw new Error(`${dir}: a patch without path or patch`);
  const parsed = parseYaml(text) as unknown;
  if (!Array.isArray(parsed))
    throw new Error(
      `${dir}: only JSON 6902 patches (a list of operations) are implemented by the test's kustomize renderer`,
    );
  if (!p.target) throw new Error(`${dir}: a JSON 6902 patch needs a target`);
  const targets = objects.filter((o) => matchesTarget(o, p.target!));
  if (targets.length === 0) throw new Error(`${dir}: patch ${p.path ?? "(inline)"} matches no object`);
  for (const o of targets) {
    for (const op of parsed as Operation[]) applyOperation(o as unknown as JsonObject, op, `${dir}: ${objectId(o)}`);
  }
}

function matchesTarget(o: K8sObject, t: Target): boolean {
  const anchored = (pattern: string, value: string) => new RegExp(`^(?:${pattern})$`).test(value);
  if (t.kind !== undefined && !anchored(t.kind, o.kind)) return false;
  if (t.name !== undefined && !anchored(t.name, o.metadata.name)) return false;
  if (t.namespace !== undefined && !anchored(t.namespace, o.metadata.namespace ?? "")) return false;
  if (t.labelSelector !== undefined && !selectorMatches(t.labelSelector, o.metadata.labels ?? {})) return false;
  return true;
}

/** A label selector in its string form: `a=b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, comma-separated. */
export function selectorMatches(selector: string, labels: Record<string, string>): boolean {
  const requirements = selector.match(/[^,(]+(?:\([^)]*\))?/g) ?? [];
  return requirements.every((raw) => {
    const r = raw.trim();
    let m: RegExpExecArray | null;
    if ((m = /^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(r))) {
      const values = m[3]!.split(",").map((v) => v.trim());
      const has = m[1]! in labels && values.includes(labels[m[1]!]!);
      return m[2] === "in" ? has : !has;
    }
    if ((m = /^([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)$/.exec(r)))
      return m[2] === "!=" ? labels[m[1]!] !== m[3] : labels[m[1]!] === m[3];
    if ((m = /^!([\w./-]+)$/.exec(r))) return !(m[1]! in labels);
    if ((m = /^([\w./-]+)$/.exec(r))) return m[1]! in labels;
    throw new Error(`label selector "${selector}": cannot read "${r}"`);
  });
}

function applyOperation(root: JsonObject, op: Operation, where: string): void {
  if (!op.path.startsWith("/")) throw new Error(`${where}: path "${op.path}" is not a JSON pointer`);
  const parts = op.path
    .slice(1)
    .split("/")
    .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
  const last = parts.pop()!;
  let parent: Json = root;
  for (const part of parts) {
    const next: Json | undefined = Array.isArray(parent)
      ? parent[Number(part)]
      : parent && typeof parent === "object"
        ? parent[part]
        : undefined;
    if (next === undefined || next === null || typeof next !== "object")
      throw new Error(`${where}: ${op.op} ${op.path}: /${parts.join("/")} does not exist`);
    parent = next;
  }
  if (Array.isArray(parent)) {
    const index = last === "-" ? parent.length : Number(last);
    if (!Number.isInteger(index) || index < 0 || index > parent.length)
      throw new Error(`${where}: ${op.op} ${op.path}: no index ${last}`);
    if (op.op === "add") parent.splice(index, 0, structuredClone(op.value!));
    else if (op.op === "replace" && index < parent.length) parent[index] = structuredClone(op.value!);
    else if (op.op === "remove" && index < parent.length) parent.splice(index, 1);
    else throw new Error(`${where}: ${op.op} ${op.path}: not possible here`);
    return;
  }
  const object = parent;
  if (op.op === "add") object[last] = structuredClone(op.value!);
  else if (op.op === "replace" && last in object) object[last] = structuredClone(op.value!);
  else if (op.op === "remove" && last in object) delete object[last];
  else
    throw new Error(`${where}: ${op.op} ${op.path}: not possible here (only add, replace and remove of what exists)`);
}
