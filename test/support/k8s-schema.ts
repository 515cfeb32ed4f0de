// Validates Kubernetes objects against the Kubernetes OpenAPI schemas, offline: the validators that
// the `kubernetes-models` package compiles from them (types, required fields, enums, formats such as
// int32 and quantities), one per apiVersion and kind; the custom resources deploy/ uses against their
// CRDs' schemas, from the same project's packages (cert-manager's Certificate, the Prometheus
// Operator's PodMonitor and PrometheusRule).
//
// The Kubernetes schemas do not forbid unknown fields (the API server drops them, or refuses them
// under strict field validation), so a misspelt field would pass them. To catch it here as
// `kubectl apply --validate=strict` would, the object is handed to the validator through proxies that
// record every property the validator reads: a schema validator reads each property its schema
// declares (and every key of a map it checks), so a property it never read is one the schema does not
// have.

export interface SchemaProblem {
  path: string;
  message: string;
}

interface ModelClass {
  apiVersion: string;
  kind: string;
  prototype: { validate(this: unknown): void };
}

const modules = new Map<string, Promise<Record<string, unknown>>>();

/** The package that has a custom resource group's models (the Kubernetes API's own are in kubernetes-models). */
const CUSTOM_RESOURCE_PACKAGES: Record<string, string> = {
  "cert-manager.io": "@kubernetes-models/cert-manager",
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator",
};

async function modelFor(apiVersion: string, kind: string): Promise<ModelClass | undefined> {
  // core/v1 is "kubernetes-models/v1"; a group's is "kubernetes-models/<group>/<version>".
  if (!/^[a-z0-9.-]+(\/[a-z0-9]+)?$/.test(apiVersion)) return undefined;
  const group = apiVersion.includes("/") ? apiVersion.split("/")[0]! : "";
  const specifier = `${CUSTOM_RESOURCE_PACKAGES[group] ?? "kubernetes-models"}/${apiVersion}`;
  if (!modules.has(specifier))
    modules.set(specifier, import(specifier).catch(() => ({})) as Promise<Record<string, unknown>>);
  const candidate = (await modules.get(specifier)!)[kind] as ModelClass | undefined;
  return candidate && candidate.apiVersion === apiVersion && candidate.kind === kind ? candidate : undefined;
}

/** Every problem of the object against its kind's schema, unknown fields included; [] when valid. */
export async function schemaProblems(object: unknown): Promise<SchemaProblem[]> {
  const o = object as { apiVersion?: unknown; kind?: unknown };
  if (typeof o?.apiVersion !== "string" || typeof o.kind !== "string")
    return [{ path: "", message: "no apiVersion and kind" }];
  const model = await modelFor(o.apiVersion, o.kind);
  if (!model) return [{ path: "", message: `no schema for ${o.apiVersion} ${o.kind} in kubernetes-models` }];

  const read = new WeakMap<object, Set<string>>();
  const proxies = new WeakMap<object, object>();
  const track = (value: unknown): unknown => {
    if (value === null || typeof value !== "object") return value;
    let proxy = proxies.get(value);
    if (!proxy) {
      const seen = new Set<string>();
      read.set(value, seen);
      proxy = new Proxy(value, {
        get(target, key, receiver) {
          if (typeof key === "string") seen.add(key);
          return track(Reflect.get(target, key, receiver));
        },
      });
      proxies.set(value, proxy);
    }
    return proxy;
  };

  const problems: SchemaProblem[] = [];
  try {
    model.prototype.validate.call(track(object));
  } catch (err) {
    const errors = (err as { errors?: { instancePath?: string; message?: string; params?: unknown }[] }).errors;
    if (!errors) throw err;
    for (const e of errors)
      problems.push({
        path: e.instancePath ?? "",
        message: `${e.message ?? "invalid"} ${JSON.stringify(e.params ?? {})}`,
      });
  }
  if (problems.length > 0) return problems;

  const walk = (value: unknown, path: string) => {
    if (value === null || typeof value !== "object") return;
    if (Array.isArray(value)) return value.forEach((v, i) => walk(v, `${path}/${i}`));
    const seen = read.get(value);
    for (const [key, child] of Object.entries(value)) {
      if (!seen?.has(key)) problems.push({ path: `${path}/${key}`, message: "unknown field (not in the schema)" });
      else walk(child, `${path}/${key}`);
    }
  };
  walk(object, "");
  return problems;
}
