// Renders a kustomization to its Kubernetes objects, offline.
//
// With `kubectl` (kustomize v4 or later built in) on PATH, `kubectl kustomize` renders it. Without, a
// small renderer here does: it implements exactly the kustomize features deploy/k8s uses — resources,
// components, JSON 6902 patches with targets (kind, name, label selector), labels, images, namespace —
// in kustomize's order, and refuses any other field, so a kustomization it cannot render fails the
// test instead of rendering wrong. Where kubectl is present the tests also hold the two renderings
// equal, object for object, so the small renderer stays true to kustomize.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
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
    kubectlState = { usable: false, why: `kubectl is not installed (${(version.error as NodeJS.ErrnoException).code ?? version.error.message})` };
  } else if (version.status !== 0) {
    kubectlState = { usable: false, why: `kubectl version failed: ${version.stderr.trim()}` };
  } else {
    const kustomize = String((JSON.parse(version.stdout) as { kustomizeVersion?: string }).kustomizeVersion ?? "");
    const major = Number(/^v?(\d+)\./.exec(kustomize)?.[1] ?? 0);
    kubectlState = major >= 4 ? { usable: true, why: `kubectl with kustomize ${kustomize}` } : { usable: false, why: `kubectl's kustomize (${kustomize || "unknown"}) predates components (v4+)` };
  }
  return kubectlState;
}

export function renderWithKubectl(dir: string): K8sObject[] {
  const built = spawnSync("kubectl", ["kustomize", dir], { encoding: "utf8", timeout: 30_000, maxBuffer: 64 * 1024 * 1024 });
  if (built.error) throw built.error;
  if (built.status !== 0) throw new Error(`kubectl kustomize ${dir} failed: ${built.stderr}`);
  return parseObjects(built.stdout, `kubectl kustomize ${dir}`);
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

const KUSTOMIZATION_FIELDS = new Set(["apiVersion", "kind", "resources", "components", "patches", "labels", "images", "namespace"]);

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
}

function readKustomization(dir: string, expectKind: "Kustomization" | "Component"): Kustomization {
  const file = ["kustomization.yaml", "kustomization.yml", "Kustomization"].map((f) => join(dir, f)).find(existsSync);
  if (!file) throw new Error(`${dir}: no kustomization.yaml`);
  const k = parseYaml(readFileSync(file, "utf8")) as Kustomization;
  const kind = k.kind ?? "Kustomization";
  if (kind !== expectKind) throw new Error(`${file}: a ${kind} where a ${expectKind} is expected`);
  for (const field of Object.keys(k)) {
    if (!KUSTOMIZATION_FIELDS.has(field)) throw new Error(`${file}: the test's kustomize renderer does not implement "${field}" (install kubectl, or extend test/support/kustomize.ts)`);
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
  // A component works on everything accumulated so far: its resources join, then its transformers run.
  for (const c of k.components ?? []) build(join(dir, c), "Component", objects);
  // kustomize's order of the built-in transformers used here.
  for (const p of k.patches ?? []) applyPatch(dir, p, objects);
  if (k.namespace) for (const o of objects) if (!CLUSTER_SCOPED.has(o.kind)) o.metadata.namespace = k.namespace;
  for (const l of k.labels ?? []) applyLabels(l, objects);
  for (const image of k.images ?? []) for (const o of objects) setImages(o as unknown as Json, image);
  checkUnique(objects, dir);
  return objects;
}

const CLUSTER_SCOPED = new Set(["Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "PriorityClass", "StorageClass", "PersistentVolume"]);
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
  if (l.includeSelectors) throw new Error("labels with includeSelectors: not implemented by the test's kustomize renderer");
  for (const o of objects) {
    o.metadata.labels = { ...(o.metadata.labels ?? {}), ...l.pairs };
    if (l.includeTemplates && POD_TEMPLATES.has(o.kind)) {
      const template = ((o.spec as JsonObject | undefined)?.template ?? undefined) as JsonObject | undefined;
      if (template) {
        const metadata = (template.metadata ??= {}) as JsonObject;
        metadata.labels = { ...((metadata.labels as Record<string, string> | undefined) ?? {}), ...l.pairs };
      }
    }
    if (l.includeTemplates && o.kind === "CronJob") throw new Error("labels on a CronJob: not implemented by the test's kustomize renderer");
  }
}

function setImages(node: Json, image: NonNullable<Kustomization["images"]>[number]): void {
  if (Array.isArray(node)) return node.forEach((n) => setImages(n, image));
  if (node === null || typeof node !== "object") return;
  for (const [key, value] of Object.entries(node)) {
    if ((key === "containers" || key === "initContainers") && Array.isArray(value)) {
      for (const c of value) {
        if (c && typeof c === "object" && !Array.isArray(c) && typeof c.image === "string") c.image = retag(c.image, image);
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
  if (!Array.isArray(parsed)) throw new Error(`${dir}: only JSON 6902 patches (a list of operations) are implemented by the test's kustomize renderer`);
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
    if ((m = /^([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)$/.exec(r))) return m[2] === "!=" ? labels[m[1]!] !== m[3] : labels[m[1]!] === m[3];
    if ((m = /^!([\w./-]+)$/.exec(r))) return !(m[1]! in labels);
    if ((m = /^([\w./-]+)$/.exec(r))) return m[1]! in labels;
    throw new Error(`label selector "${selector}": cannot read "${r}"`);
  });
}

function applyOperation(root: JsonObject, op: Operation, where: string): void {
  if (!op.path.startsWith("/")) throw new Error(`${where}: path "${op.path}" is not a JSON pointer`);
  const parts = op.path.slice(1).split("/").map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
  const last = parts.pop()!;
  let parent: Json = root;
  for (const part of parts) {
    const next: Json | undefined = Array.isArray(parent) ? parent[Number(part)] : parent && typeof parent === "object" ? parent[part] : undefined;
    if (next === undefined || next === null || typeof next !== "object") throw new Error(`${where}: ${op.op} ${op.path}: /${parts.join("/")} does not exist`);
    parent = next;
  }
  if (Array.isArray(parent)) {
    const index = last === "-" ? parent.length : Number(last);
    if (!Number.isInteger(index) || index < 0 || index > parent.length) throw new Error(`${where}: ${op.op} ${op.path}: no index ${last}`);
    if (op.op === "add") parent.splice(index, 0, structuredClone(op.value!));
    else if (op.op === "replace" && index < parent.length) parent[index] = structuredClone(op.value!);
    else if (op.op === "remove" && index < parent.length) parent.splice(index, 1);
    else throw new Error(`${where}: ${op.op} ${op.path}: not possible here`);
    return;
  }
  const object = parent as JsonObject;
  if (op.op === "add") object[last] = structuredClone(op.value!);
  else if (op.op === "replace" && last in object) object[last] = structuredClone(op.value!);
  else if (op.op === "remove" && last in object) delete object[last];
  else throw new Error(`${where}: ${op.op} ${op.path}: not possible here (only add, replace and remove of what exists)`);
}
