// deploy/ cannot be run here (no container engine, no cluster), so it is held to the code and to the
// Kubernetes API statically. Every overlay is rendered (kubectl kustomize, or the test's own renderer
// where kubectl is missing, which is held equal to kubectl where it is present) and every object is
// validated against the Kubernetes OpenAPI schemas (kubernetes-models, offline, unknown fields refused).
// Then the rendered objects are held to the code: each process sets only real settings with values they
// accept, listens and is probed where the code says, reaches its peers at `dns:///` addresses of
// headless Services, has an autoscaler, and the NetworkPolicies allow exactly the mesh's edges.
// Envoy's config is checked in deploy-envoy.test.ts.
import { expect } from "chai";
import { isDeepStrictEqual } from "node:util";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, posix, relative } from "node:path";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { identitySettings } from "@switchyard/identity";
import { paymentsSettings } from "@switchyard/payments";
import { ordersSettings } from "@switchyard/orders";
import { contentSettings } from "@switchyard/content";
import { webhooksSettings } from "@switchyard/webhooks";
import { gatewaySettings } from "@switchyard/gateway";
import { grpcTlsSettings, otlpEndpointSetting, type Setting } from "@switchyard/platform/config.js";
import { GATEWAY_SERVICE, OPERATOR_SERVICE } from "@switchyard/platform/caller.js";
import { LIVENESS } from "@switchyard/platform/server.js";
import { ORDER_WORKFLOW_SERVICE } from "@switchyard/payments/domain/access.js";
import { adminSettings } from "../scripts/admin-cli.js";
import { migrateSettings, SERVICE_MIGRATIONS } from "../scripts/migrate-cli.js";
import { ENTRIES } from "../scripts/build.mjs";
import {
  kubectlKustomize,
  objectId,
  render,
  renderLite,
  renderWithKubectl,
  type K8sObject,
} from "./support/kustomize.js";
import { schemaProblems } from "./support/k8s-schema.js";
import { addressIn, allows, type Endpoint, type NetworkPolicy, type Pod } from "./support/network-policy.js";

const ROOT = new URL("..", import.meta.url).pathname;
const DEPLOY = join(ROOT, "deploy");
const K8S = join(DEPLOY, "k8s");

const read = (path: string) => readFileSync(path, "utf8");
const rel = (path: string) => relative(ROOT, path).split("\\").join("/");

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)],
  );
}

// ---- the processes, described by the code --------------------------------------------------------

type Spec = Record<string, Setting<unknown>>;
type Name = "identity" | "payments" | "orders" | "content" | "webhooks" | "gateway";

interface Process {
  name: Name;
  settings: Spec;
  probes: "grpc" | "http";
  hasDatabase: boolean;
  /** the processes it calls (its *_ADDRESS settings) */
  calls: Name[];
  usesRedis: boolean;
}

const PROCESSES: Process[] = [
  { name: "identity", settings: identitySettings, probes: "grpc", hasDatabase: true, calls: [], usesRedis: true },
  {
    name: "payments",
    settings: paymentsSettings,
    probes: "grpc",
    hasDatabase: true,
    calls: ["identity", "webhooks"],
    usesRedis: false,
  },
  {
    name: "orders",
    settings: ordersSettings,
    probes: "grpc",
    hasDatabase: true,
    calls: ["identity", "payments", "content", "webhooks"],
    usesRedis: false,
  },
  {
    name: "content",
    settings: contentSettings,
    probes: "grpc",
    hasDatabase: true,
    calls: ["identity"],
    usesRedis: false,
  },
  {
    name: "webhooks",
    settings: webhooksSettings,
    probes: "grpc",
    hasDatabase: true,
    calls: ["identity"],
    usesRedis: false,
  },
  {
    name: "gateway",
    settings: gatewaySettings,
    probes: "http",
    hasDatabase: false,
    calls: ["identity", "payments", "orders", "content", "webhooks"],
    usesRedis: true,
  },
];
const SERVICES = PROCESSES.filter((p) => p.probes === "grpc");
/** Where components/grpc-mtls mounts a process's certificate Secret. */
const TLS_MOUNT = "/var/run/secrets/switchyard/grpc-tls";

const settingByEnv = (spec: Spec) => new Map(Object.values(spec).map((s) => [s.env, s]));

function required<T>(value: T | undefined, what: string): T {
  expect(value, what).to.not.equal(undefined);
  return value as T;
}

function defaultPort(p: Process): number {
  const port = required(p.settings.port, `${p.name} has a port setting`).fallback;
  expect(port, `${p.name}'s port setting has a default`).to.be.a("number");
  return port as number;
}

// ---- Kubernetes objects ----------------------------------------------------------------------------

type Labels = Record<string, string>;
interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    secretKeyRef?: { name: string; key: string; optional?: boolean };
    configMapKeyRef?: { name: string; key: string };
  };
}
interface Probe {
  grpc?: { port: number; service?: string };
  httpGet?: { path: string; port: number | string };
  periodSeconds?: number;
  timeoutSeconds?: number;
  failureThreshold?: number;
}
interface Container {
  name: string;
  image?: string;
  command?: string[];
  args?: string[];
  ports?: { name?: string; containerPort: number }[];
  env?: EnvVar[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: {
    runAsNonRoot?: boolean;
    readOnlyRootFilesystem?: boolean;
    allowPrivilegeEscalation?: boolean;
    capabilities?: { drop?: string[] };
  };
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  startupProbe?: Probe;
  lifecycle?: { preStop?: { exec?: { command?: string[] } } };
}
interface PodSpec {
  containers: Container[];
  enableServiceLinks?: boolean;
  automountServiceAccountToken?: boolean;
  terminationGracePeriodSeconds?: number;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; fsGroup?: number; seccompProfile?: { type: string } };
  volumes?: {
    name: string;
    emptyDir?: object;
    secret?: { secretName: string; items?: { key: string; path: string }[] };
  }[];
}
interface Workload extends K8sObject {
  spec: {
    replicas?: number;
    selector?: { matchLabels: Labels };
    template: { metadata: { labels: Labels; annotations?: Record<string, string> }; spec: PodSpec };
  };
}
interface Service extends K8sObject {
  spec: {
    clusterIP?: string;
    selector: Labels;
    ports: { name?: string; port: number; targetPort?: number | string }[];
  };
}
interface Budget extends K8sObject {
  spec: { selector: { matchLabels: Labels }; minAvailable?: number | string; maxUnavailable?: number | string };
}
interface Autoscaler extends K8sObject {
  spec: {
    scaleTargetRef: { apiVersion: string; kind: string; name: string };
    minReplicas?: number;
    maxReplicas: number;
    metrics?: { type: string; resource?: { name: string; target: { type: string; averageUtilization?: number } } }[];
  };
}
interface Secret extends K8sObject {
  stringData?: Record<string, string>;
  data?: Record<string, string>;
}

const selects = (selector: Labels, labels: Labels) => Object.entries(selector).every(([k, v]) => labels[k] === v);

/** A probe's or Service's port, by number or by the container port's name. */
function resolvePort(container: Container, port: number | string | undefined): number | undefined {
  if (typeof port === "number") return port;
  return container.ports?.find((p) => p.name === port)?.containerPort;
}

/** A container's literal settings as the process's environment (for settings read together, like GRPC_TLS_*). */
function literalEnv(env: Map<string, EnvVar>): NodeJS.ProcessEnv {
  return Object.fromEntries([...env].flatMap(([name, e]) => (e.value === undefined ? [] : [[name, e.value]])));
}

function envOf(container: Container): Map<string, EnvVar> {
  const env = new Map<string, EnvVar>();
  for (const e of container.env ?? []) {
    expect(env.has(e.name), `${container.name} sets ${e.name} once`).to.equal(false);
    env.set(e.name, e);
  }
  return env;
}

// ---- the overlays ----------------------------------------------------------------------------------

interface Overlay {
  name: "local" | "production";
  dir: string;
  objects: K8sObject[];
  how: string;
  namespace: string;
}

const OVERLAY_NAMES = ["local", "production"] as const;
const rendered = new Map<string, { objects: K8sObject[]; how: string }>();
function renderedAt(dir: string) {
  if (!rendered.has(dir)) rendered.set(dir, render(dir));
  return rendered.get(dir)!;
}
function overlay(name: Overlay["name"]): Overlay {
  const dir = join(K8S, "overlays", name);
  const { objects, how } = renderedAt(dir);
  const namespaces = new Set(
    objects.filter((o) => o.kind !== "Namespace").map((o) => o.metadata.namespace ?? "default"),
  );
  expect([...namespaces], `${name}: every object in one namespace`).to.have.length(1);
  return { name, dir, objects, how, namespace: [...namespaces][0]! };
}
function jobOf(name: Overlay["name"]): { objects: K8sObject[]; job: Workload } {
  const { objects } = renderedAt(join(K8S, "overlays", name, "create-tenant"));
  const jobs = objects.filter((o) => o.kind === "Job") as Workload[];
  expect(jobs, `${name}/create-tenant: one Job`).to.have.length(1);
  return { objects, job: jobs[0]! };
}

/** The optional components: those of deploy/k8s/components/ that neither the base nor an overlay includes (each needs something in the cluster). */
const OPTIONAL_COMPONENTS = readdirSync(join(K8S, "components")).filter(
  (c) =>
    !["base", ...OVERLAY_NAMES.map((n) => `overlays/${n}`)].some((dir) =>
      ((parseYaml(read(join(K8S, dir, "kustomization.yaml"))) as { components?: string[] }).components ?? []).some(
        (used) => used.endsWith(`/components/${c}`),
      ),
    ),
);

/**
 * An overlay with the optional components added as deploy/README.md tells an operator to: a copy of the
 * overlay's directory whose kustomization lists them before its `release` component.
 */
function renderedWithComponents(name: Overlay["name"]): { objects: K8sObject[]; how: string } {
  const key = `${name}+components`;
  if (!rendered.has(key)) {
    const source = join(K8S, "overlays", name);
    const dir = join(mkdtempSync(join(tmpdir(), "switchyard-components-")), name);
    try {
      cpSync(source, dir, { recursive: true });
      const k = parseYaml(read(join(source, "kustomization.yaml"))) as { resources?: string[]; components?: string[] };
      // Paths that leave the overlay's directory point back into the repository.
      const outside = (path: string) =>
        path.startsWith("../") ? relative(dir, join(source, path)).split("\\").join("/") : path;
      k.resources = (k.resources ?? []).map(outside);
      const release = (k.components ?? []).indexOf("release");
      expect(release, `overlays/${name} has a release component`).to.be.at.least(0);
      const optional = OPTIONAL_COMPONENTS.map((c) =>
        relative(dir, join(K8S, "components", c))
          .split("\\")
          .join("/"),
      );
      k.components = [
        ...k.components!.slice(0, release).map(outside),
        ...optional,
        ...k.components!.slice(release).map(outside),
      ];
      writeFileSync(join(dir, "kustomization.yaml"), stringifyYaml(k));
      rendered.set(key, render(dir));
    } finally {
      rmSync(dirname(dir), { recursive: true, force: true });
    }
  }
  return rendered.get(key)!;
}

const ofKind = <T extends K8sObject>(o: Overlay, kind: string) => o.objects.filter((x) => x.kind === kind) as T[];
const named = <T extends K8sObject>(o: Overlay, kind: string, name: string) =>
  required(
    ofKind<T>(o, kind).find((x) => x.metadata.name === name),
    `${o.name}: ${kind} ${name}`,
  );

interface Manifest {
  deployment: Workload;
  service: Service;
  budget: Budget;
  autoscaler: Autoscaler;
  container: Container;
  env: Map<string, EnvVar>;
}
function manifestOf(o: Overlay, p: Process): Manifest {
  const deployment = named<Workload>(o, "Deployment", p.name);
  const containers = deployment.spec.template.spec.containers;
  expect(containers, `${p.name}: containers`).to.have.length(1);
  return {
    deployment,
    service: named<Service>(o, "Service", p.name),
    budget: named<Budget>(o, "PodDisruptionBudget", p.name),
    autoscaler: named<Autoscaler>(o, "HorizontalPodAutoscaler", p.name),
    container: containers[0]!,
    env: envOf(containers[0]!),
  };
}

/** `dns:///host:port` → host and port (the gRPC name syntax for a DNS-resolved, balanced target). */
function dnsTarget(value: string): { host: string; port: number } | undefined {
  const m = /^dns:\/\/\/([a-z0-9.-]+):(\d{1,5})$/.exec(value);
  return m ? { host: m[1]!, port: Number(m[2]) } : undefined;
}

// ==================================================================================================

describe("deploy/ (Kubernetes)", function () {
  this.timeout(60_000);

  describe("kustomize", () => {
    const kustomizations = filesUnder(K8S).filter((f) => f.endsWith("kustomization.yaml"));

    it("every kustomization's resources and components exist", () => {
      expect(kustomizations.map(rel)).to.include.members([
        "deploy/k8s/base/kustomization.yaml",
        "deploy/k8s/components/process-defaults/kustomization.yaml",
        "deploy/k8s/overlays/local/kustomization.yaml",
        "deploy/k8s/overlays/production/kustomization.yaml",
        "deploy/k8s/jobs/create-tenant/kustomization.yaml",
      ]);
      for (const file of kustomizations) {
        const k = parseYaml(read(file)) as {
          resources?: string[];
          components?: string[];
          patches?: { path?: string }[];
        };
        for (const r of [
          ...(k.resources ?? []),
          ...(k.components ?? []),
          ...(k.patches ?? []).flatMap((p) => (p.path ? [p.path] : [])),
        ]) {
          const path = join(dirname(file), r);
          expect(existsSync(path), `${rel(file)}: ${r} exists`).to.equal(true);
          if (statSync(path).isDirectory())
            expect(existsSync(join(path, "kustomization.yaml")), `${rel(path)} is a kustomization`).to.equal(true);
        }
      }
    });

    it("the five processes share one set of pod settings (a component), not five copies", () => {
      const base = parseYaml(read(join(K8S, "base", "kustomization.yaml"))) as { components?: string[] };
      expect(base.components, "the base uses the process-defaults component").to.include(
        "../components/process-defaults",
      );
      for (const p of PROCESSES) {
        const text = read(join(K8S, "base", `${p.name}.yaml`));
        for (const shared of [
          "securityContext",
          "preStop",
          "periodSeconds",
          "terminationGracePeriodSeconds",
          "enableServiceLinks",
          "minReplicas",
        ]) {
          expect(
            text,
            `base/${p.name}.yaml repeats ${shared} (it belongs in components/process-defaults)`,
          ).to.not.include(shared);
        }
      }
    });

    for (const name of [...OVERLAY_NAMES, ...OVERLAY_NAMES.map((n) => `${n}/create-tenant`)]) {
      it(`overlays/${name} renders, and every object is valid against the Kubernetes schemas`, async () => {
        const { objects, how } = renderedAt(join(K8S, "overlays", name));
        console.log(`      (overlays/${name}: ${objects.length} objects, rendered with ${how})`);
        expect(objects.length).to.be.greaterThan(0);
        const ids = objects.map(objectId);
        expect(new Set(ids).size, "no object twice").to.equal(ids.length);
        const problems: string[] = [];
        for (const o of objects)
          for (const p of await schemaProblems(o)) problems.push(`${o.kind}/${o.metadata.name}${p.path}: ${p.message}`);
        expect(problems).to.deep.equal([]);
      });
    }

    it("the optional components render onto either overlay, and every object is valid against the Kubernetes schemas and its CRD's", async () => {
      expect(OPTIONAL_COMPONENTS).to.include("cert-manager");
      for (const name of OVERLAY_NAMES) {
        const { objects, how } = renderedWithComponents(name);
        const added = objects.filter((o) => !overlay(name).objects.some((x) => objectId(x) === objectId(o)));
        console.log(
          `      (overlays/${name} + ${OPTIONAL_COMPONENTS.join(", ")}: ${added.map((o) => `${o.kind}/${o.metadata.name}`).join(", ")}, rendered with ${how})`,
        );
        expect(added.length).to.be.greaterThan(0);
        const problems: string[] = [];
        for (const o of objects)
          for (const p of await schemaProblems(o)) problems.push(`${o.kind}/${o.metadata.name}${p.path}: ${p.message}`);
        expect(problems).to.deep.equal([]);
      }
      // The schemas of the custom resources refuse unknown fields too.
      const certificate = structuredClone(
        renderedWithComponents("production").objects.find((o) => o.kind === "Certificate")!,
      ) as any;
      certificate.spec.secretNmae = certificate.spec.secretName;
      expect((await schemaProblems(certificate)).map((p) => p.path)).to.include("/spec/secretNmae");
    });

    it("cert-manager keeps the Secret Envoy mounts", () => {
      const objects = renderedWithComponents("production").objects;
      const certificate = objects.find(
        (o) => o.kind === "Certificate" && o.metadata.name === "envoy-tls",
      ) as K8sObject & { spec: { secretName: string; privateKey?: { rotationPolicy?: string } } };
      const envoy = objects.find((o) => o.kind === "Deployment" && o.metadata.name === "envoy") as Workload;
      const secretVolumes = (envoy.spec.template.spec.volumes ?? [])
        .filter((v) => v.secret)
        .map((v) => v.secret!.secretName);
      expect(secretVolumes).to.include(certificate.spec.secretName);
      expect(certificate.spec.privateKey?.rotationPolicy, "a new key with each renewal").to.equal("Always");
    });

    it("the schema check refuses a misspelt field, a wrong type and a missing required field", async () => {
      const deployment = structuredClone(named<Workload>(overlay("production"), "Deployment", "gateway"));
      expect(await schemaProblems(deployment)).to.deep.equal([]);
      const misspelt = structuredClone(deployment) as any;
      misspelt.spec.template.spec.containers[0].readinesProbe =
        misspelt.spec.template.spec.containers[0].readinessProbe;
      delete misspelt.spec.template.spec.containers[0].readinessProbe;
      expect((await schemaProblems(misspelt)).map((p) => p.path)).to.deep.equal([
        "/spec/template/spec/containers/0/readinesProbe",
      ]);
      const wrongType = structuredClone(deployment) as any;
      wrongType.spec.template.spec.containers[0].ports[0].containerPort = "8080";
      expect((await schemaProblems(wrongType)).map((p) => p.path)).to.include(
        "/spec/template/spec/containers/0/ports/0/containerPort",
      );
      const autoscaler = structuredClone(
        named<Autoscaler>(overlay("production"), "HorizontalPodAutoscaler", "gateway"),
      ) as any;
      delete autoscaler.spec.maxReplicas;
      expect((await schemaProblems(autoscaler)).map((p) => p.message).join()).to.include("maxReplicas");
    });

    it("the test's own renderer renders exactly what kubectl kustomize does", function () {
      const kubectl = kubectlKustomize();
      if (!kubectl.usable) {
        // Not silent: the overlays are still rendered (by the test's renderer) and checked below.
        console.log(`      (cannot compare with kubectl: ${kubectl.why})`);
        this.skip();
      }
      for (const dir of ["base", ...OVERLAY_NAMES.flatMap((n) => [`overlays/${n}`, `overlays/${n}/create-tenant`])].map(
        (d) => join(K8S, d),
      )) {
        const lite = new Map(renderLite(dir).map((o) => [objectId(o), o]));
        const real = new Map(renderWithKubectl(dir).map((o) => [objectId(o), o]));
        expect([...lite.keys()].sort(), rel(dir)).to.deep.equal([...real.keys()].sort());
        for (const [id, o] of real)
          expect(isDeepStrictEqual(lite.get(id), o), `${rel(dir)}: ${id} rendered alike`).to.equal(true);
      }
    });
  });

  describe("Kubernetes habits", () => {
    const RECOMMENDED = ["name", "instance", "version", "component", "part-of", "managed-by"].map(
      (l) => `app.kubernetes.io/${l}`,
    );
    /** Every rendering an operator applies: each overlay, its create-tenant Job, and it with the optional components. */
    const renderings = () =>
      OVERLAY_NAMES.flatMap((name) => [
        { what: `overlays/${name}`, name, objects: overlay(name).objects },
        { what: `overlays/${name}/create-tenant`, name, objects: jobOf(name).objects },
        { what: `overlays/${name} + components`, name, objects: renderedWithComponents(name).objects },
      ]);
    const podTemplates = (objects: K8sObject[]) =>
      objects.filter((o) => ["Deployment", "StatefulSet", "Job"].includes(o.kind)) as Workload[];

    it("every object and pod template carries the recommended labels; version is the release's image tag, instance the overlay's", () => {
      for (const { what, name, objects } of renderings()) {
        const image = manifestOf(overlay(name), PROCESSES[0]!).container.image!;
        const tag = /:([\w.-]+)(@|$)/.exec(image.split("/").pop()!)?.[1];
        for (const o of objects) {
          const labels = o.metadata.labels ?? {};
          for (const l of RECOMMENDED)
            expect(labels[l], `${what}: ${o.kind}/${o.metadata.name} ${l}`).to.be.a("string").and.not.equal("");
          expect(labels["app.kubernetes.io/part-of"]).to.equal("switchyard");
          expect(
            labels["app.kubernetes.io/version"],
            `${what}: ${o.kind}/${o.metadata.name} runs the release's version`,
          ).to.equal(tag);
          expect(labels["app.kubernetes.io/instance"]).to.equal(`switchyard-${name}`);
        }
        for (const w of podTemplates(objects)) {
          for (const l of RECOMMENDED)
            expect(w.spec.template.metadata.labels[l], `${what}: ${w.kind}/${w.metadata.name}'s pods: ${l}`).to.be.a(
              "string",
            );
        }
      }
    });

    it("every container requests and limits ephemeral storage", () => {
      for (const { what, objects } of renderings()) {
        for (const w of podTemplates(objects)) {
          const pod = w.spec.template.spec as PodSpec & { initContainers?: Container[] };
          for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
            expect(
              c.resources?.requests?.["ephemeral-storage"],
              `${what}: ${w.metadata.name}/${c.name} requests`,
            ).to.be.a("string");
            expect(c.resources?.limits?.["ephemeral-storage"], `${what}: ${w.metadata.name}/${c.name} limits`).to.be.a(
              "string",
            );
          }
        }
      }
    });

    it("every workload runs as a ServiceAccount of its own that mounts no token", () => {
      for (const name of OVERLAY_NAMES) {
        const objects = overlay(name).objects;
        const accounts = new Map(
          objects
            .filter((o) => o.kind === "ServiceAccount")
            .map((o) => [o.metadata.name, o as K8sObject & { automountServiceAccountToken?: boolean }]),
        );
        const used = new Map<string, string>();
        for (const w of [...podTemplates(objects), jobOf(name).job]) {
          const pod = w.spec.template.spec as PodSpec & { serviceAccountName?: string };
          const account = required(
            pod.serviceAccountName,
            `overlays/${name}: ${w.kind}/${w.metadata.name} names its ServiceAccount`,
          );
          expect(used.get(account), `${account} serves ${w.metadata.name} alone`).to.equal(undefined);
          used.set(account, w.metadata.name);
          expect(account, "named as its workload's app").to.equal(
            w.spec.template.metadata.labels["app.kubernetes.io/name"],
          );
          expect(
            accounts.get(account)?.automountServiceAccountToken,
            `overlays/${name}: ServiceAccount ${account} exists, no token`,
          ).to.equal(false);
          expect(pod.automountServiceAccountToken, `${w.metadata.name}: no token in the pod`).to.equal(false);
        }
      }
    });

    it("production spreads every Deployment of the mesh over nodes and zones", () => {
      for (const d of ofKind<Workload>(overlay("production"), "Deployment")) {
        const keys = (
          (d.spec.template.spec as PodSpec & { topologySpreadConstraints?: { topologyKey: string }[] })
            .topologySpreadConstraints ?? []
        ).map((t) => t.topologyKey);
        expect(keys, d.metadata.name).to.include.members(["kubernetes.io/hostname", "topology.kubernetes.io/zone"]);
      }
    });

    it("the Prometheus Operator component scrapes what the annotations name, and its rules are the alert file's", () => {
      const objects = renderedWithComponents("production").objects;
      const monitor = objects.find((o) => o.kind === "PodMonitor") as K8sObject & {
        spec: { selector: { matchLabels: Labels }; podMetricsEndpoints: { port: string; path: string }[] };
      };
      for (const w of podTemplates(objects).filter(
        (x) => x.spec.template.metadata.annotations?.["prometheus.io/scrape"] === "true",
      )) {
        const annotations = w.spec.template.metadata.annotations!;
        expect(
          selects(monitor.spec.selector.matchLabels, w.spec.template.metadata.labels),
          `the PodMonitor selects ${w.metadata.name}`,
        ).to.equal(true);
        const ports = w.spec.template.spec.containers[0]!.ports ?? [];
        const endpoint = monitor.spec.podMetricsEndpoints.find((e) => ports.some((p) => p.name === e.port));
        expect(endpoint, `${w.metadata.name}: an endpoint for a port it has`).to.not.equal(undefined);
        expect(
          String(ports.find((p) => p.name === endpoint!.port)!.containerPort),
          `${w.metadata.name}: the annotated port`,
        ).to.equal(annotations["prometheus.io/port"]);
        expect(endpoint!.path).to.equal(annotations["prometheus.io/path"]);
      }
      const rule = objects.find((o) => o.kind === "PrometheusRule") as K8sObject & { spec: { groups: unknown } };
      const alerts = parseYaml(read(join(DEPLOY, "observability", "switchyard-alerts.yaml"))) as { groups: unknown };
      expect(rule.spec.groups).to.deep.equal(alerts.groups);
    });

    it("the tracing component sets every process's OTLP endpoint, a value each accepts", () => {
      const o = { ...overlay("production"), ...renderedWithComponents("production") };
      for (const p of PROCESSES) {
        const endpoint = required(
          manifestOf(o, p).env.get(otlpEndpointSetting.env)?.value,
          `${p.name}: ${otlpEndpointSetting.env}`,
        );
        expect(() => p.settings.otlpEndpoint!.parse(endpoint)).to.not.throw();
      }
      for (const p of PROCESSES)
        expect(
          manifestOf(overlay("production"), p).env.has(otlpEndpointSetting.env),
          `${p.name}: no tracing as shipped`,
        ).to.equal(false);
    });
  });

  for (const overlayName of OVERLAY_NAMES) {
    describe(`overlays/${overlayName}`, () => {
      for (const p of PROCESSES) {
        describe(p.name, () => {
          it("has a Deployment, a Service, a PodDisruptionBudget and a HorizontalPodAutoscaler, selecting its pods only", () => {
            const o = overlay(overlayName);
            const { deployment, service, budget, autoscaler } = manifestOf(o, p);
            const podLabels = deployment.spec.template.metadata.labels;
            expect(
              selects(deployment.spec.selector!.matchLabels, podLabels),
              "Deployment selects its own pods",
            ).to.equal(true);
            expect(service.spec.selector, "Service selector").to.be.an("object").that.does.not.deep.equal({});
            expect(selects(service.spec.selector, podLabels), "Service selects the pods").to.equal(true);
            expect(
              selects(budget.spec.selector.matchLabels, podLabels),
              "PodDisruptionBudget selects the pods",
            ).to.equal(true);
            expect(autoscaler.spec.scaleTargetRef).to.deep.equal({
              apiVersion: "apps/v1",
              kind: "Deployment",
              name: p.name,
            });
            for (const other of ofKind<Workload>(o, "Deployment").filter((d) => d !== deployment)) {
              expect(
                selects(service.spec.selector, other.spec.template.metadata.labels),
                `${p.name} Service must not select ${other.metadata.name} pods`,
              ).to.equal(false);
            }
          });

          it("is scaled by CPU between bounds its PodDisruptionBudget fits (the Deployment sets no replicas)", () => {
            const { deployment, budget, autoscaler, container } = manifestOf(overlay(overlayName), p);
            expect(deployment.spec.replicas, "replicas are the autoscaler's").to.equal(undefined);
            const min = required(autoscaler.spec.minReplicas, "minReplicas");
            expect(autoscaler.spec.maxReplicas).to.be.greaterThan(min);
            if (overlayName === "production") expect(min, "production runs at least two of each").to.be.at.least(2);
            const cpu = autoscaler.spec.metrics?.find((m) => m.type === "Resource" && m.resource?.name === "cpu");
            expect(cpu?.resource?.target.type, "a CPU utilization target").to.equal("Utilization");
            expect(container.resources?.requests?.cpu, "utilization is of the CPU request").to.be.a("string");
            for (const kind of ["requests", "limits"] as const)
              expect(container.resources?.[kind], `resources.${kind}`).to.include.keys("cpu", "memory");
            // One pod at a time may be evicted; with two or more replicas one always serves.
            expect(budget.spec.minAvailable, "minAvailable would block draining a one-replica overlay").to.equal(
              undefined,
            );
            expect(budget.spec.maxUnavailable).to.equal(1);
            if (min >= 2) expect(budget.spec.maxUnavailable).to.be.lessThan(min);
          });

          it("runs its compiled bundle: node --enable-source-maps --no-allocation-site-pretenuring --no-memory-reducer dist/<name>.js, from this overlay's image", () => {
            const o = overlay(overlayName);
            const { container } = manifestOf(o, p);
            expect([...(container.command ?? []), ...(container.args ?? [])]).to.deep.equal([
              "node",
              "--enable-source-maps",
              "--no-allocation-site-pretenuring",
              "--no-memory-reducer",
              `dist/${p.name}.js`,
            ]);
            const images = new Set(
              ofKind<Workload>(o, "Deployment")
                .filter((d) => PROCESSES.some((q) => q.name === d.metadata.name))
                .map((d) => d.spec.template.spec.containers[0]!.image),
            );
            expect([...images], "every process runs the same image").to.deep.equal([container.image]);
            if (overlayName === "local") expect(container.image).to.equal("switchyard:dev");
            else
              expect(container.image, "a released image: a version tag or a digest").to.match(
                /^[\w.-]+(\.[\w.-]+)+(:\d+)?\/[\w./-]+(:\d[\w.-]*|@sha256:[a-f0-9]{64})$/,
              );
          });

          it("listens on its port setting's default, exposed by its Service (headless for a gRPC service)", () => {
            const { container, service, env } = manifestOf(overlay(overlayName), p);
            const port = defaultPort(p);
            // A service also exposes its metrics port (its <SERVICE>_METRICS_PORT); the gateway serves /metrics on its own.
            const metricsPort = p.settings.metricsPort ? Number(env.get(p.settings.metricsPort.env)?.value) : undefined;
            expect(container.ports?.map((cp) => cp.containerPort)).to.deep.equal(
              metricsPort ? [port, metricsPort] : [port],
            );
            const portEnv = env.get(p.settings.port!.env)?.value;
            if (portEnv !== undefined) expect(Number(portEnv), p.settings.port!.env).to.equal(port);
            expect(service.spec.ports).to.have.length(1);
            expect(service.spec.ports[0]!.port, "Service port").to.equal(port);
            expect(
              resolvePort(container, service.spec.ports[0]!.targetPort ?? service.spec.ports[0]!.port),
              "Service targetPort",
            ).to.equal(port);
            // gRPC clients (and Envoy, for the gateway) resolve a headless Service to every ready pod and
            // balance over them.
            expect(service.spec.clusterIP, "headless").to.equal("None");
          });

          it("is scraped by Prometheus where it serves /metrics (annotations), and not on its gRPC port", () => {
            const { deployment, env } = manifestOf(overlay(overlayName), p);
            const annotations = deployment.spec.template.metadata.annotations ?? {};
            expect(annotations["prometheus.io/scrape"]).to.equal("true");
            expect(annotations["prometheus.io/path"]).to.equal("/metrics");
            if (p.probes === "grpc") {
              const metricsPort = required(
                env.get(p.settings.metricsPort!.env)?.value,
                `${p.name} sets ${p.settings.metricsPort!.env}`,
              );
              expect(Number(metricsPort)).to.be.greaterThan(0);
              expect(annotations["prometheus.io/port"]).to.equal(metricsPort);
            } else {
              expect(Number(annotations["prometheus.io/port"])).to.equal(defaultPort(p));
            }
          });

          it("sets only real settings of the process, with values they accept", () => {
            const { env } = manifestOf(overlay(overlayName), p);
            const known = settingByEnv(p.settings);
            expect(env.size, "sets some settings").to.be.greaterThan(0);
            for (const [name, e] of env) {
              const setting = known.get(name);
              expect(
                setting,
                `${name} is a setting of ${p.name} (one of ${[...known.keys()].join(", ")})`,
              ).to.not.equal(undefined);
              if (e.value !== undefined)
                expect(() => setting!.parse(e.value!, literalEnv(env)), `${name}=${e.value}`).to.not.throw();
              else
                expect(e.valueFrom?.secretKeyRef, `${name} is a literal or comes from a Secret`).to.not.equal(
                  undefined,
                );
            }
          });

          it("sets every setting the process cannot start without, binds every interface, overrides every loopback default", () => {
            const { env } = manifestOf(overlay(overlayName), p);
            for (const s of Object.values(p.settings)) {
              if (s.fallback === undefined && !s.optional)
                expect(env.has(s.env), `${s.env} is required by ${p.name}`).to.equal(true);
              if (typeof s.fallback === "string" && /^(127\.0\.0\.1|localhost)\b/.test(s.fallback)) {
                expect(env.has(s.env), `${s.env} defaults to ${s.fallback}, unreachable in a pod`).to.equal(true);
              }
            }
            expect(env.get(p.settings.host!.env)?.value, p.settings.host!.env).to.equal("0.0.0.0");
          });

          it("reaches each peer at dns:///<headless Service>:<port>, which the setting accepts", () => {
            const o = overlay(overlayName);
            const { env } = manifestOf(o, p);
            const addresses = [...env].filter(([name]) => name.endsWith("_ADDRESS"));
            expect(addresses.map(([name]) => name).sort()).to.deep.equal(
              p.calls.map((c) => `${c.toUpperCase()}_ADDRESS`).sort(),
            );
            for (const [name, e] of addresses) {
              const value = required(e.value, name);
              const target = required(dnsTarget(value), `${name}=${value} is dns:///host:port`);
              const peer = PROCESSES.find((t) => name === `${t.name.toUpperCase()}_ADDRESS`)!;
              expect(target.host, `${name} host`).to.equal(peer.name);
              const service = named<Service>(o, "Service", target.host);
              expect(service.spec.clusterIP, `${target.host} is headless (one address per ready pod)`).to.equal("None");
              const servicePort = required(
                service.spec.ports.find((sp) => sp.port === target.port),
                `Service ${target.host} exposes ${target.port}`,
              );
              const peerManifest = manifestOf(o, peer);
              expect(
                resolvePort(peerManifest.container, servicePort.targetPort ?? servicePort.port),
                `${name} reaches ${peer.name}'s container port`,
              ).to.equal(defaultPort(peer));
              // The code must accept it (dns:/// targets balance with round_robin).
              expect(
                () => p.settings[`${peer.name}Address`]!.parse(value),
                `${p.name} accepts ${name}=${value}`,
              ).to.not.throw();
            }
          });

          if (p.hasDatabase) {
            it("reads DATABASE_URL, its own role's, from the Secret and owns its schema", () => {
              const { env } = manifestOf(overlay(overlayName), p);
              const url = required(env.get("DATABASE_URL"), "DATABASE_URL is set");
              expect(url.value, "DATABASE_URL is no literal").to.equal(undefined);
              expect(url.valueFrom?.secretKeyRef).to.deep.include({
                name: "switchyard-database",
                key: `${p.name}-url`,
              });
              expect(url.valueFrom?.secretKeyRef?.optional, "the Secret is required").to.not.equal(true);
              expect(env.get(p.settings.databaseSchema!.env)?.value, p.settings.databaseSchema!.env).to.equal(
                p.settings.databaseSchema!.fallback,
              );
            });
          }

          if (p.hasDatabase) {
            it("migrates its schema in an init container (dist/migrate.js, the same URL and schema, no probe's clock), then only verifies it at start", () => {
              const { deployment, env } = manifestOf(overlay(overlayName), p);
              const pod = deployment.spec.template.spec as PodSpec & { initContainers?: Container[] };
              expect(pod.initContainers?.map((c) => c.name)).to.deep.equal(["migrate"]);
              const init = pod.initContainers![0]!;
              expect(init.image, "the service's image").to.equal(deployment.spec.template.spec.containers[0]!.image);
              expect(init.command).to.deep.equal(["node", "--enable-source-maps", "dist/migrate.js", p.name]);
              expect(Object.keys(SERVICE_MIGRATIONS)).to.include(p.name);
              // Its variables are the command's settings, valued as the service's own.
              const initEnv = envOf(init);
              const known = settingByEnv(migrateSettings(p.name));
              for (const [name, e] of initEnv) {
                const setting = required(known.get(name), `${name} is a setting of migrate.js`);
                if (e.value !== undefined) expect(() => setting.parse(e.value!)).to.not.throw();
                expect(e, `${name} as the service has it`).to.deep.equal(env.get(name));
              }
              expect([...initEnv.keys()].sort()).to.deep.equal(["DATABASE_URL", p.settings.databaseSchema!.env].sort());
              expect(init.securityContext?.readOnlyRootFilesystem).to.equal(true);
              expect(init.securityContext?.allowPrivilegeEscalation).to.equal(false);
              expect(init.securityContext?.capabilities?.drop).to.deep.equal(["ALL"]);
              expect(
                init.readinessProbe ?? init.livenessProbe ?? init.startupProbe,
                "no probe cuts a long migration off",
              ).to.equal(undefined);
              expect(env.get(p.settings.databaseMigrations!.env)?.value, "the service only verifies").to.equal(
                "verify",
              );
            });
          }

          it(p.usesRedis ? "reads REDIS_URL from the Secret switchyard-redis" : "has no Redis", () => {
            const { env } = manifestOf(overlay(overlayName), p);
            const redis = env.get("REDIS_URL");
            if (!p.usesRedis) return expect(redis).to.equal(undefined);
            expect(p.settings.redisUrl?.env, `${p.name} has a REDIS_URL setting`).to.equal("REDIS_URL");
            expect(required(redis, "REDIS_URL").valueFrom?.secretKeyRef).to.deep.equal({
              name: "switchyard-redis",
              key: "url",
            });
          });

          it(
            p.probes === "grpc"
              ? "is probed over grpc.health.v1 on its port (with mutual TLS, on its plaintext health port)"
              : "is probed on /readyz and /healthz",
            () => {
              const { container, env } = manifestOf(overlay(overlayName), p);
              // The kubelet's gRPC probe carries no client certificate: under mutual TLS it asks GRPC_HEALTH_PORT.
              const healthPort = env.get("GRPC_HEALTH_PORT")?.value;
              if (p.probes === "grpc")
                expect(
                  healthPort !== undefined,
                  "a health port exactly when the service port requires client certificates",
                ).to.equal(env.has("GRPC_TLS_CERT_FILE"));
              const port = p.probes === "grpc" && healthPort !== undefined ? Number(healthPort) : defaultPort(p);
              const probes = {
                startup: container.startupProbe,
                readiness: container.readinessProbe,
                liveness: container.livenessProbe,
              };
              for (const [what, probe] of Object.entries(probes)) {
                required(probe, `${what}Probe`);
                expect(probe!.periodSeconds, `${what} period`).to.be.a("number");
                if (p.probes === "grpc") {
                  expect(probe!.grpc?.port, `${what} grpc probe port`).to.equal(port);
                  // Readiness asks the overall status (it serves); startup and liveness ask whether the
                  // process runs, which a database outage does not change (server.ts, LIVENESS).
                  expect(
                    probe!.grpc?.service ?? "",
                    `${what} probes ${what === "readiness" ? "the overall service" : "liveness"}`,
                  ).to.equal(what === "readiness" ? "" : LIVENESS);
                } else {
                  expect(probe!.httpGet?.path, `${what} path`).to.equal(what === "readiness" ? "/readyz" : "/healthz");
                  expect(resolvePort(container, probe!.httpGet?.port), `${what} port`).to.equal(port);
                }
              }
            },
          );

          it("drains before the grace period ends, after endpoints are removed", () => {
            const { deployment, container, env } = manifestOf(overlay(overlayName), p);
            const drainEnv = p.settings.drainTimeoutMs!.env;
            const drainMs = Number(required(env.get(drainEnv)?.value, `${drainEnv} is set`));
            const preStop = required(container.lifecycle?.preStop?.exec?.command, "preStop exec command");
            expect(preStop[0], "preStop sleeps").to.equal("sleep");
            const sleepMs = Number(preStop[1]) * 1000;
            expect(sleepMs, "preStop sleep").to.be.greaterThan(0);
            const graceMs =
              required(deployment.spec.template.spec.terminationGracePeriodSeconds, "terminationGracePeriodSeconds") *
              1000;
            expect(graceMs, `grace period > preStop sleep + ${drainEnv}`).to.be.greaterThan(sleepMs + drainMs);
          });

          it("runs as non-root on a read-only root filesystem with no volume (but its certificate's, read-only), no privileges and no API token", () => {
            const { deployment, container, env } = manifestOf(overlay(overlayName), p);
            const pod = deployment.spec.template.spec;
            expect(
              pod.securityContext?.runAsNonRoot ?? container.securityContext?.runAsNonRoot,
              "runAsNonRoot",
            ).to.equal(true);
            expect(pod.securityContext?.runAsUser, "the image's node user").to.equal(1000);
            expect(pod.securityContext?.seccompProfile?.type).to.equal("RuntimeDefault");
            expect(container.securityContext?.readOnlyRootFilesystem, "readOnlyRootFilesystem").to.equal(true);
            expect(container.securityContext?.allowPrivilegeEscalation, "allowPrivilegeEscalation").to.equal(false);
            expect(container.securityContext?.capabilities?.drop).to.deep.equal(["ALL"]);
            expect(pod.automountServiceAccountToken).to.equal(false);
            // Compiled bundles need no writable directory (tsx needed one for its cache). With mutual TLS the
            // one volume is the Secret of its certificate (components/grpc-mtls), mounted read-only.
            const tls = env.has("GRPC_TLS_CERT_FILE");
            expect(pod.volumes ?? [], "volumes").to.deep.equal(
              tls ? [{ name: "grpc-tls", secret: { secretName: `${p.name}-grpc-tls` } }] : [],
            );
            expect(container.volumeMounts ?? [], "volume mounts").to.deep.equal(
              tls ? [{ name: "grpc-tls", mountPath: TLS_MOUNT, readOnly: true }] : [],
            );
          });

          it("gets no Service-link variable that collides with a setting", () => {
            const o = overlay(overlayName);
            const { deployment, env } = manifestOf(o, p);
            const known = settingByEnv(p.settings);
            const collisions = ofKind<Service>(o, "Service")
              .map((s) => `${s.metadata.name.toUpperCase().replace(/-/g, "_")}_PORT`)
              .filter((name) => known.has(name) && !env.has(name));
            if (collisions.length > 0)
              expect(
                deployment.spec.template.spec.enableServiceLinks,
                `enableServiceLinks (${collisions.join(", ")})`,
              ).to.equal(false);
          });
        });
      }

      it("every Deployment of a process, and Envoy's, has an autoscaler; nothing else does", () => {
        const o = overlay(overlayName);
        const targets = ofKind<Autoscaler>(o, "HorizontalPodAutoscaler")
          .map((a) => a.spec.scaleTargetRef.name)
          .sort();
        expect(targets).to.deep.equal([...PROCESSES.map((p) => p.name), "envoy"].sort());
        for (const d of ofKind<Workload>(o, "Deployment").filter((d) => !targets.includes(d.metadata.name))) {
          expect(d.spec.replicas, `${d.metadata.name} (no autoscaler) runs one replica`).to.equal(1);
        }
      });

      it("wires Redis: the Secret switchyard-redis names a Redis the gateway and identity may reach", () => {
        const o = overlay(overlayName);
        const secrets = ofKind<Secret>(o, "Secret");
        const policies = ofKind<NetworkPolicy & K8sObject>(o, "NetworkPolicy");
        const redisClients = named<NetworkPolicy & K8sObject>(o, "NetworkPolicy", "redis-clients");
        const to = redisClients.spec.egress?.[0]?.to;
        expect(to, "the overlay names where Redis is").to.not.equal(undefined);
        if (overlayName === "local") {
          // In-cluster: the URL's host:port is the redis Service, which selects the redis pods.
          const secret = required(
            secrets.find((s) => s.metadata.name === "switchyard-redis"),
            "Secret switchyard-redis",
          );
          const url = new URL(required(secret.stringData?.url, "key url"));
          expect(() => gatewaySettings.redisUrl.parse(url.href)).to.not.throw();
          expect(() => identitySettings.redisUrl.parse(url.href)).to.not.throw();
          const service = named<Service>(o, "Service", url.hostname);
          expect(service.spec.ports.map((sp) => sp.port)).to.include(Number(url.port || 6379));
          const redis = named<Workload>(o, "Deployment", "redis");
          expect(selects(service.spec.selector, redis.spec.template.metadata.labels)).to.equal(true);
          const redisPod: Pod = { namespace: o.namespace, labels: redis.spec.template.metadata.labels };
          for (const p of PROCESSES) {
            const pod: Pod = {
              namespace: o.namespace,
              labels: named<Workload>(o, "Deployment", p.name).spec.template.metadata.labels,
            };
            expect(
              allows(policies, pod, redisPod, Number(url.port || 6379), "TCP", o.namespace),
              `${p.name} → redis`,
            ).to.equal(p.usesRedis);
          }
        } else {
          // Managed: the operator creates the Secret; nothing secret is written in the overlay.
          expect(secrets, "production writes no Secret").to.deep.equal([]);
          expect(
            ofKind(o, "ConfigMap").map((c) => c.metadata.name),
            "production's one ConfigMap is Envoy's configuration",
          )
            .to.have.length(1)
            .and.to.satisfy((names: string[]) => names[0]!.startsWith("envoy-config-"));
          expect(JSON.stringify(to)).to.include("ipBlock");
        }
      });

      for (const variant of ["as shipped", "with the optional components"] as const)
        it(`the NetworkPolicies allow exactly the mesh's edges, the call graph of the code (${variant})`, () => {
          const o: Overlay =
            variant === "as shipped"
              ? overlay(overlayName)
              : { ...overlay(overlayName), ...renderedWithComponents(overlayName) };
          const tracing = variant !== "as shipped";
          const ns = o.namespace;
          const policies = ofKind<NetworkPolicy & K8sObject>(o, "NetworkPolicy");
          const deny = required(
            policies.find(
              (p) =>
                isDeepStrictEqual(p.spec.podSelector, {}) &&
                isDeepStrictEqual([...(p.spec.policyTypes ?? [])].sort(), ["Egress", "Ingress"]) &&
                !p.spec.ingress &&
                !p.spec.egress,
            ),
            "a default-deny policy",
          );
          expect(deny.metadata.name).to.equal("default-deny");

          const podOf = (name: string): Pod => ({
            namespace: ns,
            labels: named<Workload>(o, "Deployment", name).spec.template.metadata.labels,
          });
          const pods: Record<string, Endpoint> = Object.fromEntries(PROCESSES.map((p) => [p.name, podOf(p.name)]));
          pods.admin = { namespace: ns, labels: jobOf(overlayName).job.spec.template.metadata.labels };
          pods.envoy = podOf("envoy");
          pods.stranger = { namespace: ns, labels: { "app.kubernetes.io/name": "something-else" } };
          // The scraper: Prometheus in the "monitoring" namespace.
          pods.prometheus = { namespace: "monitoring", labels: { "app.kubernetes.io/name": "prometheus" } };
          // A pod elsewhere wearing the gateway's labels is not the gateway.
          pods.impostor = { namespace: "elsewhere", labels: podOf("gateway").labels };
          if (overlayName === "local") {
            pods.redis = podOf("redis");
            pods.postgres = {
              namespace: ns,
              labels: named<Workload>(o, "StatefulSet", "postgres").spec.template.metadata.labels,
            };
          }
          // The OpenTelemetry collector the tracing component names.
          pods.collector = { namespace: "monitoring", labels: { "app.kubernetes.io/name": "opentelemetry-collector" } };
          const ports = {
            envoy: 8443,
            gateway: 8080,
            identity: 50051,
            payments: 50052,
            orders: 50053,
            content: 50054,
            webhooks: 50055,
            redis: 6379,
            postgres: 5432,
            metrics: 9464,
            collector: 4318,
          } as Record<string, number>;

          // The call graph, from the code: each process's *_ADDRESS settings, its REDIS_URL, its exporter.
          const expected = new Set([
            "envoy→gateway",
            ...PROCESSES.flatMap((p) => p.calls.map((callee) => `${p.name}→${callee}`)),
            "admin→identity",
            ...(overlayName === "local" ? PROCESSES.filter((p) => p.usesRedis).map((p) => `${p.name}→redis`) : []),
            ...(overlayName === "local" ? PROCESSES.filter((p) => p.hasDatabase).map((p) => `${p.name}→postgres`) : []),
            ...(tracing ? PROCESSES.map((p) => `${p.name}→collector`) : []),
            // Envoy is the public edge: a pod outside the namespace reaches it as the internet does.
            "impostor→envoy",
            "prometheus→envoy",
            "collector→envoy",
            // The scrape: each service's and Envoy's metrics port, the gateway's /metrics on its port; nothing else.
            "prometheus→envoy:9464",
            "prometheus→gateway",
            "prometheus→identity:9464",
            "prometheus→payments:9464",
            "prometheus→orders:9464",
            "prometheus→content:9464",
            "prometheus→webhooks:9464",
          ]);
          const actual: string[] = [];
          for (const [from, fromPod] of Object.entries(pods)) {
            for (const [to, toPod] of Object.entries(pods)) {
              if (from === to || !(to in ports)) continue;
              // The collector is outside the namespace, open to anyone its own policies admit: only the
              // mesh's way to it is this namespace's to say.
              if (to === "collector" && (fromPod as Pod).namespace !== ns) continue;
              for (const port of new Set(Object.values(ports))) {
                if (allows(policies, fromPod, toPod, port, "TCP", ns))
                  actual.push(port === ports[to] ? `${from}→${to}` : `${from}→${to}:${port}`);
              }
            }
          }
          expect(actual.sort()).to.deep.equal([...expected].sort());

          // From outside: the edge only.
          const internet = { ip: "203.0.113.7" };
          const inNamespace = Object.entries(pods).filter(([, pod]) => (pod as Pod).namespace === ns);
          for (const [to, toPod] of inNamespace.filter(([to]) => to in ports)) {
            expect(allows(policies, internet, toPod, ports[to]!, "TCP", ns), `internet → ${to}`).to.equal(
              to === "envoy",
            );
          }

          // Out: DNS for everyone; PostgreSQL outside the cluster for the services in production (local: the
          // in-cluster one above); nothing else.
          const dns: Pod = { namespace: "kube-system", labels: { "k8s-app": "kube-dns" } };
          const database = named<NetworkPolicy & K8sObject>(o, "NetworkPolicy", "database");
          const dbCidr = database.spec.egress?.[0]?.to?.find((t) => t.ipBlock)?.ipBlock?.cidr;
          if (overlayName === "production")
            expect(dbCidr, "production names the database's address range").to.be.a("string");
          const dbAddress = { ip: dbCidr ? addressIn(dbCidr) : "192.0.2.10" };
          const redisCidr = named<NetworkPolicy & K8sObject>(
            o,
            "NetworkPolicy",
            "redis-clients",
          ).spec.egress?.[0]?.to?.find((t) => t.ipBlock)?.ipBlock?.cidr;
          for (const [name, pod] of inNamespace) {
            expect(allows(policies, pod, dns, 53, "UDP", ns), `${name} → DNS`).to.equal(true);
            const service = SERVICES.some((s) => s.name === name);
            expect(allows(policies, pod, dbAddress, 5432, "TCP", ns), `${name} → PostgreSQL`).to.equal(
              service && overlayName === "production",
            );
            // Partners' endpoints: webhooks alone, https alone, public addresses alone.
            expect(allows(policies, pod, internet, 443, "TCP", ns), `${name} → the internet`).to.equal(
              name === "webhooks",
            );
            expect(allows(policies, pod, internet, 80, "TCP", ns), `${name} → the internet, plain http`).to.equal(
              false,
            );
            for (const inward of ["10.1.2.3", "169.254.169.254", "172.20.0.1", "192.168.0.1", "100.64.0.1"])
              expect(allows(policies, pod, { ip: inward }, 443, "TCP", ns), `${name} → ${inward}`).to.equal(false);
            // IPv6: a public address on 443 as IPv4's; nothing inward, however it is written.
            expect(allows(policies, pod, { ip: "2606:4700::1111" }, 443, "TCP", ns), `${name} → public IPv6`).to.equal(
              name === "webhooks",
            );
            expect(allows(policies, pod, { ip: "2606:4700::1111" }, 80, "TCP", ns), `${name} → IPv6 :80`).to.equal(
              false,
            );
            for (const inward of [
              "::1",
              "::",
              "fc00::1",
              "fd00:ec2::254",
              "fe80::1",
              "ff02::1",
              "::ffff:10.0.0.1",
              "::ffff:127.0.0.1",
              "64:ff9b::a00:1",
              "2002:a00:1::1",
              "2001::a00:1",
            ])
              expect(allows(policies, pod, { ip: inward }, 443, "TCP", ns), `${name} → ${inward}`).to.equal(false);
            if (overlayName === "production") {
              expect(allows(policies, pod, internet, 5432, "TCP", ns), `${name} → PostgreSQL elsewhere`).to.equal(
                false,
              );
              const redis = { ip: addressIn(required(redisCidr, "production names Redis's address range")) };
              expect(allows(policies, pod, redis, 6379, "TCP", ns), `${name} → Redis`).to.equal(
                PROCESSES.some((p) => p.name === name && p.usesRedis),
              );
            }
          }
        });

      it("the services' connections at the autoscalers' ceiling fit in the database's max_connections", () => {
        const o = overlay(overlayName);
        const database = named<NetworkPolicy & K8sObject>(o, "NetworkPolicy", "database");
        const limit = Number(
          required(
            (database.metadata as { annotations?: Record<string, string> }).annotations?.[
              "switchyard/database-max-connections"
            ],
            "the limit the overlay was sized for",
          ),
        );
        // PostgreSQL keeps 3 for superusers (superuser_reserved_connections); one more for an operator's psql.
        let budget = 3 + 1;
        const rows: string[] = [];
        for (const p of SERVICES) {
          const { env, autoscaler, deployment } = manifestOf(o, p);
          const pool = Number(env.get(p.settings.databasePoolMax!.env)?.value ?? p.settings.databasePoolMax!.fallback);
          // During a rollout at the ceiling, the surge pod runs beside them (its migrate init container
          // holds one connection before the service starts: within its pool's share).
          const surge = Number(
            (deployment.spec as { strategy?: { rollingUpdate?: { maxSurge?: number } } }).strategy?.rollingUpdate
              ?.maxSurge ?? 0,
          );
          // A process that LISTENs holds one connection for it beside its pool (sql.ts: PostgresDatabase.listen).
          const listens = filesUnder(join(ROOT, "services", p.name, "src", "store")).some((f) =>
            read(f).includes(".listen("),
          )
            ? 1
            : 0;
          // The replica relaying its outbox (one at a time, by lease) LISTENs for its commits: one more
          // connection for the service, unless each replica has its LISTEN connection already.
          const relayListens =
            listens === 0 && read(join(ROOT, "services", p.name, "src", "service.ts")).includes("webhookRelay(")
              ? 1
              : 0;
          budget += (autoscaler.spec.maxReplicas + surge) * (pool + listens) + relayListens;
          rows.push(
            `${p.name} ${autoscaler.spec.maxReplicas + surge}×(${pool}+${listens})${relayListens ? " + 1" : ""}`,
          );
        }
        expect(budget, `${rows.join(" + ")} + 4 reserved ≤ ${limit}`).to.be.at.most(limit);
        if (overlayName === "local") {
          const args = named<Workload>(o, "StatefulSet", "postgres").spec.template.spec.containers[0]!.args ?? [];
          expect(args.join(" "), "the in-cluster server's limit is the one named").to.include(
            `max_connections=${limit}`,
          );
        }
        // The README's table says the same.
        expect(read(join(DEPLOY, "README.md")), "deploy/README.md states the sum").to.include(
          `| ${overlayName} | ${rows.join(" + ")} + 4 | ${budget} | ${limit} |`,
        );
      });

      it("the gateway trusts exactly one proxy hop (Envoy's), and only Envoy reaches it", () => {
        const { env } = manifestOf(
          overlay(overlayName),
          PROCESSES.find((p) => p.name === "gateway")!,
        );
        expect(env.get(gatewaySettings.trustedProxyHops.env)?.value).to.equal("1");
      });
    });
  }

  describe("overlays/local stands alone", () => {
    const o = () => overlay("local");
    const secretData = (objects: K8sObject[], name: string): Record<string, string> => {
      const secret = required(
        objects.find((x) => x.kind === "Secret" && x.metadata.name === name),
        `Secret ${name}`,
      ) as Secret;
      return Object.fromEntries(
        Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, "base64").toString("utf8")]),
      );
    };

    it("has a namespace of its own, and makes every Secret and ConfigMap its pods and its create-tenant Job read", () => {
      const namespace = named(o(), "Namespace", o().namespace);
      expect(o().namespace, "not the cluster's default namespace").to.not.equal("default");
      expect(namespace.metadata.labels?.["pod-security.kubernetes.io/enforce"]).to.equal("restricted");
      const { objects: jobObjects, job } = jobOf("local");
      const available = [...o().objects, ...jobObjects];
      const has = (kind: string, name: string) => available.some((x) => x.kind === kind && x.metadata.name === name);
      for (const w of [
        ...(o().objects.filter((x) => ["Deployment", "StatefulSet"].includes(x.kind)) as Workload[]),
        job,
      ]) {
        const pod = w.spec.template.spec;
        for (const c of pod.containers) {
          for (const e of c.env ?? []) {
            if (e.valueFrom?.secretKeyRef)
              expect(
                has("Secret", e.valueFrom.secretKeyRef.name),
                `${w.metadata.name}: ${e.name} from Secret ${e.valueFrom.secretKeyRef.name}`,
              ).to.equal(true);
            if (e.valueFrom?.configMapKeyRef)
              expect(
                has("ConfigMap", e.valueFrom.configMapKeyRef.name),
                `${w.metadata.name}: ${e.name} from ConfigMap ${e.valueFrom.configMapKeyRef.name}`,
              ).to.equal(true);
          }
        }
        for (const v of (pod.volumes ?? []) as {
          name: string;
          secret?: { secretName: string };
          configMap?: { name: string };
        }[]) {
          if (v.secret)
            expect(has("Secret", v.secret.secretName), `${w.metadata.name}: volume ${v.name}`).to.equal(true);
          if (v.configMap)
            expect(has("ConfigMap", v.configMap.name), `${w.metadata.name}: volume ${v.name}`).to.equal(true);
        }
      }
      expect((named<Secret>(o(), "Secret", "envoy-tls") as Secret & { type?: string }).type).to.equal(
        "kubernetes.io/tls",
      );
    });

    it("runs PostgreSQL, made at its first start by deploy/postgres/roles.sql, and each service's URL names its own role there", () => {
      const postgres = named<Workload>(o(), "StatefulSet", "postgres");
      const container = postgres.spec.template.spec.containers[0]!;
      const env = envOf(container);
      const passwords = secretData(o().objects, "switchyard-postgres");
      // The roles ConfigMap is roles.sql, and the init script runs it with every password it asks for.
      const volumes = postgres.spec.template.spec.volumes as { name: string; configMap?: { name: string } }[];
      const mountOf = (path: string) =>
        required(
          container.volumeMounts?.find((m) => path.startsWith(`${m.mountPath}/`) || path === m.mountPath),
          `a mount holds ${path}`,
        );
      const configMapAt = (path: string) =>
        named<K8sObject & { data: Record<string, string> }>(
          o(),
          "ConfigMap",
          required(volumes.find((v) => v.name === mountOf(path).name)?.configMap?.name, `ConfigMap at ${path}`),
        );
      const init = configMapAt("/docker-entrypoint-initdb.d");
      const script = Object.values(init.data).join("\n");
      const rolesPath = required(/-f\s+(\S+)/.exec(script)?.[1], "the script runs a file");
      const rolesSql = read(join(DEPLOY, "postgres", "roles.sql"));
      expect(configMapAt(rolesPath).data[posix.basename(rolesPath)], "the file is deploy/postgres/roles.sql").to.equal(
        rolesSql,
      );
      const asked = [...new Set([...rolesSql.matchAll(/:'(\w+_password)'/g)].map((m) => m[1]!))];
      expect(asked.sort()).to.deep.equal(SERVICES.map((p) => `${p.name}_password`).sort());
      for (const variable of asked) {
        const from = required(
          new RegExp(`-v ${variable}="\\$(\\w+)"`).exec(script)?.[1],
          `init script passes ${variable}`,
        );
        const ref = required(env.get(from)?.valueFrom?.secretKeyRef, `${from} from a Secret`);
        expect(ref.name).to.equal("switchyard-postgres");
        const service = variable.replace(/_password$/, "");
        // Each service's URL: its role (roles.sql's default name), that password, this server and database.
        const url = new URL(secretData(o().objects, "switchyard-database")[`${service}-url`]!);
        expect(decodeURIComponent(url.username)).to.equal(`switchyard_${service}`);
        expect(decodeURIComponent(url.password), `${service}'s password`).to.equal(passwords[ref.key]);
        const svc = named<Service>(o(), "Service", url.hostname);
        expect(
          selects(svc.spec.selector, postgres.spec.template.metadata.labels),
          `${url.hostname} is PostgreSQL's Service`,
        ).to.equal(true);
        expect(svc.spec.ports.map((sp) => sp.port)).to.include(Number(url.port));
        expect(url.pathname.slice(1)).to.equal(env.get("POSTGRES_DB")?.value);
        const p = SERVICES.find((x) => x.name === service)!;
        expect(() => p.settings.databaseUrl!.parse(url.href), `${service} accepts its URL`).to.not.throw();
      }
    });

    it("its throwaway service credentials are ones the processes accept, and identity lists the gateway's, orders' and the operator's", () => {
      const credentials = secretData(o().objects, "switchyard-service-credentials");
      expect(() => identitySettings.serviceClients.parse(credentials["identity-service-clients"]!)).to.not.throw();
      const listed = new Set(credentials["identity-service-clients"]!.split(","));
      for (const [client, key] of [
        ["orders", "orders-secret"],
        ["gateway", "gateway-secret"],
        ["operator", "operator-secret"],
      ] as const) {
        expect(listed.has(`${client}:${credentials[key]}`), `identity lists ${client}'s secret`).to.equal(true);
      }
      expect(() => ordersSettings.serviceSecret.parse(credentials["orders-secret"]!)).to.not.throw();
      expect(() => gatewaySettings.serviceSecret.parse(credentials["gateway-secret"]!)).to.not.throw();
      expect(() => adminSettings.operatorSecret.parse(credentials["operator-secret"]!)).to.not.throw();
      const signing = secretData(o().objects, "switchyard-signing-key")["encryption-key"]!;
      expect(() => identitySettings.keyEncryptionKey.parse(signing)).to.not.throw();
      // Named as throwaway where they are written.
      expect(read(join(K8S, "overlays", "local", "kustomization.yaml"))).to.include("THROWAWAY");
    });
  });

  describe("the create-tenant Job", () => {
    for (const overlayName of OVERLAY_NAMES) {
      it(`overlays/${overlayName}/create-tenant runs dist/admin.js create-tenant against identity, with the overlay's image and namespace`, () => {
        const o = overlay(overlayName);
        const { job } = jobOf(overlayName);
        const pod = job.spec.template.spec;
        const container = pod.containers[0]!;
        expect(pod.containers).to.have.length(1);
        expect(container.image, "the services' image").to.equal(manifestOf(o, PROCESSES[0]!).container.image);
        expect(job.metadata.namespace ?? "default").to.equal(o.namespace);
        const env = envOf(container);
        const command = [...(container.command ?? []), ...(container.args ?? [])];
        expect(command.slice(0, 4)).to.deep.equal(["node", "--enable-source-maps", "dist/admin.js", "create-tenant"]);
        expect(command[5]).to.equal("--admin");
        expect(command[7]).to.equal("--password-file");
        // Every variable is a setting of admin.js with a value it accepts, or one the arguments name ($(VAR)).
        const inArguments = new Set([...command.join(" ").matchAll(/\$\((\w+)\)/g)].map((m) => m[1]!));
        for (const name of inArguments) expect(env.has(name), `$(${name}) is set`).to.equal(true);
        const known = settingByEnv(adminSettings);
        for (const [name, e] of env) {
          if (inArguments.has(name)) continue;
          const setting = required(
            known.get(name),
            `${name} is a setting of admin.js (one of ${[...known.keys()].join(", ")})`,
          );
          if (e.value !== undefined)
            expect(() => setting.parse(e.value!, literalEnv(env)), `${name}=${e.value}`).to.not.throw();
        }
        for (const s of Object.values(adminSettings))
          if (!("fallback" in s && s.fallback !== undefined) && !("optional" in s && s.optional))
            expect(env.has(s.env), `${s.env} is required by admin.js`).to.equal(true);
        // identity as the services reach it.
        expect(env.get("IDENTITY_ADDRESS")?.value).to.equal(
          manifestOf(
            o,
            PROCESSES.find((p) => p.name === "payments")!,
          ).env.get("IDENTITY_ADDRESS")?.value,
        );
        expect(env.get("OPERATOR_SECRET")?.valueFrom?.secretKeyRef).to.deep.equal({
          name: "switchyard-service-credentials",
          key: "operator-secret",
        });
        // The password is a file from the Secret switchyard-first-admin (key password), never an argument or variable.
        const passwordFile = command[8]!;
        const mount = required(
          container.volumeMounts?.find((m) => passwordFile.startsWith(`${m.mountPath}/`)),
          `a volume holds ${passwordFile}`,
        );
        expect(mount.readOnly).to.equal(true);
        const volume = required(
          pod.volumes?.find((v) => v.name === mount.name),
          "the volume",
        );
        expect(volume.secret?.secretName).to.equal("switchyard-first-admin");
        expect(volume.secret?.items).to.deep.equal([
          { key: "password", path: passwordFile.slice(mount.mountPath.length + 1) },
        ]);
        expect(pod.securityContext?.fsGroup, "the file is readable by the process's group").to.equal(
          pod.securityContext?.runAsUser,
        );
        expect(container.securityContext?.readOnlyRootFilesystem).to.equal(true);
        expect(pod.securityContext?.runAsNonRoot).to.equal(true);
      });
    }

    it("is not part of any overlay's apply, and identity lists the operator's credential", () => {
      for (const name of OVERLAY_NAMES)
        expect(ofKind(overlay(name), "Job"), `overlays/${name} applies no Job`).to.deep.equal([]);
      const identity = manifestOf(overlay("production"), PROCESSES[0]!).env.get(identitySettings.serviceClients.env);
      expect(identity?.valueFrom?.secretKeyRef).to.deep.equal({
        name: "switchyard-service-credentials",
        key: "identity-service-clients",
      });
      // identity parses "orders:<secret>,operator:<secret>" (the shape deploy/README.md has the operator write).
      const secret = "x".repeat(43);
      expect(() => identitySettings.serviceClients.parse(`orders:${secret},operator:${secret}`)).to.not.throw();
      expect(read(join(DEPLOY, "README.md"))).to.include("operator-secret");
    });
  });

  describe("mutual TLS inside the mesh (components/grpc-mtls, used by overlays/production)", () => {
    interface Certificate extends K8sObject {
      spec: {
        secretName: string;
        isCA?: boolean;
        uris?: string[];
        duration?: string;
        renewBefore?: string;
        usages?: string[];
        privateKey?: { rotationPolicy?: string };
        issuerRef: { kind?: string; name: string };
      };
    }
    interface Issuer extends K8sObject {
      spec: { ca?: { secretName: string }; selfSigned?: object };
    }
    const hours = (d: string | undefined) =>
      Number(required(/^(\d+)h$/.exec(d ?? "")?.[1], `a duration in hours: ${d}`));
    const trustDomain = grpcTlsSettings.tlsTrustDomain.fallback!;

    /** The Certificate whose Secret is `secretName`, checked to be a workload's: issued by the mesh CA, renewed with a new key. */
    function workloadCertificate(o: Overlay, secretName: string): Certificate {
      const certificate = required(
        ofKind<Certificate>(o, "Certificate").find((c) => c.spec.secretName === secretName),
        `a Certificate for Secret ${secretName}`,
      );
      const issuer = named<Issuer>(o, "Issuer", certificate.spec.issuerRef.name);
      expect(certificate.spec.issuerRef.kind, "a namespaced Issuer").to.equal("Issuer");
      const caSecret = required(issuer.spec.ca?.secretName, `Issuer ${issuer.metadata.name} is a CA issuer`);
      const ca = required(
        ofKind<Certificate>(o, "Certificate").find((c) => c.spec.secretName === caSecret),
        "the CA's Certificate",
      );
      expect(ca.spec.isCA, "the CA's certificate is a CA").to.equal(true);
      expect(
        ca.spec.privateKey?.rotationPolicy,
        "the CA keeps its key when renewed: what it signed before still verifies",
      ).to.equal("Never");
      expect(named<Issuer>(o, "Issuer", ca.spec.issuerRef.name).spec.selfSigned, "the CA is self-signed").to.not.equal(
        undefined,
      );
      expect(certificate.spec.privateKey?.rotationPolicy, "a new key with each renewal").to.equal("Always");
      expect(hours(certificate.spec.renewBefore)).to.be.lessThan(hours(certificate.spec.duration));
      // Renewed files are read again long before the old certificate ends.
      expect(grpcTlsSettings.tlsReloadIntervalMs.fallback!).to.be.lessThan(
        hours(certificate.spec.renewBefore) * 3_600_000,
      );
      expect(certificate.spec.usages, "presented as a client").to.include("client auth");
      return certificate;
    }

    it("production: every process presents a certificate naming it (spiffe://<trust domain>/<process>), mounted as the files GRPC_TLS_* name", () => {
      const o = overlay("production");
      for (const p of PROCESSES) {
        const { env, deployment } = manifestOf(o, p);
        expect(env.get("GRPC_TLS_CERT_FILE")?.value, p.name).to.equal(`${TLS_MOUNT}/tls.crt`);
        expect(env.get("GRPC_TLS_KEY_FILE")?.value, p.name).to.equal(`${TLS_MOUNT}/tls.key`);
        expect(env.get("GRPC_TLS_CA_FILE")?.value, p.name).to.equal(`${TLS_MOUNT}/ca.crt`);
        expect(env.get("GRPC_TLS_TRUST_DOMAIN")?.value ?? trustDomain, p.name).to.equal(trustDomain);
        const secret = required(
          deployment.spec.template.spec.volumes?.find((v) => v.name === "grpc-tls")?.secret?.secretName,
          `${p.name} mounts a certificate`,
        );
        const certificate = workloadCertificate(o, secret);
        expect(certificate.spec.uris, p.name).to.deep.equal([`spiffe://${trustDomain}/${p.name}`]);
        if (p.probes === "grpc") expect(certificate.spec.usages, `${p.name} serves`).to.include("server auth");
      }
    });

    it("production: the names the call policies trust are the ones the certificates carry (orders at payments, the gateway and the operator at identity)", () => {
      const o = overlay("production");
      const named = new Set(ofKind<Certificate>(o, "Certificate").flatMap((c) => c.spec.uris ?? []));
      for (const service of [ORDER_WORKFLOW_SERVICE, GATEWAY_SERVICE, OPERATOR_SERVICE])
        expect(named, service).to.include(`spiffe://${trustDomain}/${service}`);
    });

    it("production's create-tenant Job calls identity with the operator's certificate", () => {
      const o = overlay("production");
      const { job } = jobOf("production");
      const container = job.spec.template.spec.containers[0]!;
      const env = envOf(container);
      expect(env.get("GRPC_TLS_CERT_FILE")?.value).to.equal(`${TLS_MOUNT}/tls.crt`);
      const volume = required(
        job.spec.template.spec.volumes?.find((v) => v.name === "grpc-tls"),
        "the certificate's volume",
      );
      expect(container.volumeMounts?.find((m) => m.name === "grpc-tls")).to.deep.equal({
        name: "grpc-tls",
        mountPath: TLS_MOUNT,
        readOnly: true,
      });
      expect(workloadCertificate(o, volume.secret!.secretName).spec.uris).to.deep.equal([
        `spiffe://${trustDomain}/${OPERATOR_SERVICE}`,
      ]);
    });

    it("local runs plaintext (no cert-manager on kind), and no overlay serves reflection", () => {
      const local = overlay("local");
      expect(
        ofKind(local, "Certificate").filter((c) => c.metadata.name.endsWith("-grpc-tls")),
        "no mesh certificates locally",
      ).to.deep.equal([]);
      for (const name of OVERLAY_NAMES) {
        for (const p of PROCESSES) {
          const { env } = manifestOf(overlay(name), p);
          if (name === "local") expect(env.has("GRPC_TLS_CERT_FILE"), `${p.name} locally`).to.equal(false);
          expect(env.get("GRPC_REFLECTION")?.value ?? "false", `${name}/${p.name}: reflection`).to.equal("false");
        }
      }
    });
  });

  describe("secrets", () => {
    it("identity seals its signing keys under a key from a Secret", () => {
      const env = manifestOf(overlay("production"), PROCESSES[0]!).env;
      const key = required(env.get(identitySettings.keyEncryptionKey.env), "SIGNING_KEY_ENCRYPTION_KEY is set");
      expect(key.valueFrom?.secretKeyRef).to.deep.equal({ name: "switchyard-signing-key", key: "encryption-key" });
    });

    it("the secrets of orders and the gateway and identity's client list come from one Secret, each key read by its own process only", () => {
      const o = overlay("production");
      const secret = manifestOf(
        o,
        PROCESSES.find((p) => p.name === "orders")!,
      ).env.get(ordersSettings.serviceSecret.env)?.valueFrom?.secretKeyRef;
      const gateway = manifestOf(
        o,
        PROCESSES.find((p) => p.name === "gateway")!,
      ).env.get(gatewaySettings.serviceSecret.env)?.valueFrom?.secretKeyRef;
      const clients = manifestOf(o, PROCESSES[0]!).env.get(identitySettings.serviceClients.env)?.valueFrom
        ?.secretKeyRef;
      expect(secret?.name, "from a Secret").to.equal("switchyard-service-credentials");
      expect([clients?.name, gateway?.name], "the same Secret").to.deep.equal([secret?.name, secret?.name]);
      expect(new Set([clients?.key, secret?.key, gateway?.key]).size, "a key each").to.equal(3);
      const payments = manifestOf(
        o,
        PROCESSES.find((p) => p.name === "payments")!,
      ).env.get(paymentsSettings.serviceSecret.env)?.valueFrom?.secretKeyRef;
      expect([payments?.name, new Set([clients?.key, secret?.key, gateway?.key, payments?.key]).size]).to.deep.equal([
        secret?.name,
        4,
      ]);
      for (const p of PROCESSES.filter((q) => !["orders", "identity", "gateway", "payments"].includes(q.name))) {
        const refs = [...manifestOf(o, p).env.values()].map((e) => e.valueFrom?.secretKeyRef?.name);
        expect(refs, `${p.name} reads no service credential`).to.not.include(secret?.name);
      }
      // identity parses the client list deploy/README.md has the operator write, the gateway's entry included.
      expect(read(join(DEPLOY, "README.md"))).to.include("gateway:$GATEWAY");
    });

    it("every service has a database role of its own, created by the script deploy/README.md names", () => {
      const keys = SERVICES.map(
        (p) => manifestOf(overlay("production"), p).env.get("DATABASE_URL")?.valueFrom?.secretKeyRef?.key,
      );
      expect(new Set(keys).size, "one URL (one role) per service").to.equal(keys.length);
      expect(read(join(DEPLOY, "README.md"))).to.include("deploy/postgres/roles.sql");
      expect(existsSync(join(DEPLOY, "postgres", "roles.sql"))).to.equal(true);
    });
  });

  describe("nothing for development in deploy/", () => {
    const files = filesUnder(DEPLOY);

    it("no demo data or demo credentials, in any file or rendered object", () => {
      expect(files.length).to.be.greaterThan(10);
      const needles = [
        "demo-password",
        "@acme.test",
        "@globex.test",
        ...PROCESSES.flatMap((p) =>
          Object.values(p.settings)
            .map((s) => s.env)
            .filter((e) => /DEMO/.test(e)),
        ),
      ];
      expect(needles).to.include.members([identitySettings.demoData.env, contentSettings.demoData.env]);
      for (const file of files)
        for (const needle of needles) expect(read(file), `${rel(file)} contains "${needle}"`).to.not.include(needle);
      for (const name of OVERLAY_NAMES) {
        const text = JSON.stringify(overlay(name).objects);
        for (const needle of needles) expect(text, `overlays/${name} contains "${needle}"`).to.not.include(needle);
      }
    });

    it("no tsx: the processes run compiled bundles", () => {
      for (const file of files) expect(read(file), `${rel(file)} mentions tsx`).to.not.match(/\btsx\b/);
    });
  });

  describe("Dockerfile", () => {
    interface Instruction {
      keyword: string;
      args: string;
    }
    interface Stage {
      from: string;
      name?: string;
      instructions: Instruction[];
    }
    const parseDockerfile = (text: string) => {
      const lines = text
        .replace(/\\\r?\n/g, " ")
        .split(/\r?\n/)
        .map((l) => l.trim())
        .filter((l) => l !== "" && !l.startsWith("#"));
      const args = new Map<string, string>();
      const stages: Stage[] = [];
      for (const line of lines) {
        const m = /^(\w+)\s+([\s\S]*)$/.exec(line);
        if (!m) continue;
        const keyword = m[1]!.toUpperCase();
        const rest = m[2]!.trim();
        if (keyword === "FROM") {
          const [image = "", , name] = rest.split(/\s+/);
          stages.push({
            from: image.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a?: string, b?: string) => args.get((a ?? b)!) ?? ""),
            ...(name ? { name } : {}),
            instructions: [],
          });
        } else if (stages.length === 0 && keyword === "ARG") {
          const [key, value = ""] = rest.split("=");
          args.set(key!.trim(), value.trim());
        } else stages.at(-1)?.instructions.push({ keyword, args: rest });
      }
      return stages;
    };
    const copied = (stage: Stage, fromStage?: string) =>
      stage.instructions
        .filter(
          (i) => i.keyword === "COPY" && (fromStage ? i.args.includes(`--from=${fromStage}`) : !/--from=/.test(i.args)),
        )
        .flatMap((i) =>
          i.args
            .split(/\s+/)
            .filter((w) => !w.startsWith("--"))
            .slice(0, -1)
            .map((w) => w.replace(/\/$/, "")),
        );
    const runs = (stage: Stage) => stage.instructions.filter((i) => i.keyword === "RUN").map((i) => i.args);

    const stages = parseDockerfile(read(join(DEPLOY, "Dockerfile")));
    const runtime = stages.at(-1)!;
    const builder = stages[0]!;
    const rootPackage = JSON.parse(read(join(ROOT, "package.json"))) as {
      workspaces: string[];
      scripts: Record<string, string>;
      dependencies?: Record<string, string>;
      devDependencies?: Record<string, string>;
    };

    it("builds on the current Node LTS (24, bookworm-slim), pinned by digest", () => {
      expect(stages.length).to.be.greaterThan(1);
      for (const stage of stages) expect(stage.from).to.match(/^node:24-bookworm-slim@sha256:[a-f0-9]{64}$/);
    });

    it("bundles in a build stage: npm ci, then npm run build (the repository's build script)", () => {
      expect(
        runs(builder).some((r) => /^npm ci\b/.test(r) && !r.includes("--omit=dev")),
        "npm ci with dev packages",
      ).to.equal(true);
      expect(runs(builder)).to.include("npm run build");
      expect(rootPackage.scripts.build, "package.json has a build script").to.be.a("string");
    });

    it("runs the bundles with production packages only, as a non-root user, the default command identity's", () => {
      const install = required(
        runs(runtime).find((r) => /\bnpm ci\b/.test(r)),
        "the runtime stage installs packages",
      );
      expect(install).to.include("--omit=dev").and.to.include("--ignore-scripts");
      for (const file of [
        "package.json",
        "package-lock.json",
        ...rootPackage.workspaces.map((ws) => `${ws}/package.json`),
      ]) {
        expect(copied(runtime), `npm ci needs ${file}`).to.include(file);
      }
      expect(copied(runtime, builder.name), "the bundles come from the build stage").to.include("/app/dist");
      // The gateway reads its OpenAPI document at run time.
      expect(copied(runtime)).to.include("gateway/openapi");
      for (const source of copied(runtime)) expect(existsSync(join(ROOT, source)), `COPY ${source}`).to.equal(true);
      expect(
        copied(runtime).filter((s) => /(^|\/)src$/.test(s)),
        "no TypeScript sources in the image",
      ).to.deep.equal([]);
      const user = required(runtime.instructions.filter((i) => i.keyword === "USER").at(-1), "USER").args;
      expect(user.split(":")[0]).to.equal("1000");
      expect(runtime.instructions.some((i) => i.keyword === "ENV" && /\bNODE_ENV=production\b/.test(i.args))).to.equal(
        true,
      );
      const cmd = JSON.parse(
        required(runtime.instructions.filter((i) => i.keyword === "CMD").at(-1), "CMD").args,
      ) as string[];
      expect(cmd).to.deep.equal([
        "node",
        "--enable-source-maps",
        "--no-allocation-site-pretenuring",
        "--no-memory-reducer",
        "dist/identity.js",
      ]);
    });

    it("the bundles the manifests run are the ones npm run build makes", () => {
      const bundles = Object.keys(ENTRIES).map((name) => `dist/${name}.js`);
      for (const name of [...PROCESSES.map((p) => p.name), "admin", "migrate"])
        expect(bundles, `npm run build makes dist/${name}.js`).to.include(`dist/${name}.js`);
      for (const o of [
        ...OVERLAY_NAMES.map((n) => overlay(n).objects),
        ...OVERLAY_NAMES.map((n) => jobOf(n).objects),
      ]) {
        for (const w of o.filter((x) => x.kind === "Deployment" || x.kind === "Job") as Workload[]) {
          const pod = w.spec.template.spec as PodSpec & { initContainers?: Container[] };
          for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
            const command = c.command ?? [];
            // node, its flags, then the bundle.
            const bundle = command.find((arg, i) => i > 0 && !arg.startsWith("-"));
            if (command[0] === "node")
              expect(bundles, `${w.kind} ${w.metadata.name}/${c.name} runs ${bundle}`).to.include(bundle);
          }
        }
      }
    });

    it("the build stage gets every source the build reads (the ignore file keeps none of them out)", () => {
      const ignored = read(join(DEPLOY, "Dockerfile.dockerignore"))
        .split(/\r?\n/)
        .map((l) => l.trim())
        .filter((l) => l && !l.startsWith("#"));
      const patterns = ignored.map(
        (p) =>
          new RegExp(
            `^${p
              .replace(/\*\*\//g, "\u0000")
              .replace(/[.+?^${}()|[\]\\]/g, "\\$&")
              .replace(/\*/g, "[^/]*")
              .replace(/\u0000/g, "(.*/)?")}(/.*)?$`,
          ),
      );
      const excluded = (path: string) => patterns.some((re) => re.test(path));
      expect(copied(builder), "the build stage copies the context").to.include(".");
      // Every source file any bundle holds (dist/meta.json, from the build the test run made first).
      const bundled = Object.values(
        JSON.parse(read(join(ROOT, "dist", "meta.json"))) as Record<string, { sources: string[] }>,
      ).flatMap((b) => b.sources);
      expect(bundled.length, "the build's record of its sources").to.be.above(50);
      const needed = [
        ...new Set([
          ...Object.values(ENTRIES),
          ...bundled,
          "scripts/build.mjs",
          "gen/package.json",
          "gateway/openapi/v1.yaml",
          "package-lock.json",
        ]),
      ];
      for (const file of needed) {
        expect(existsSync(join(ROOT, file)), `${file} exists`).to.equal(true);
        expect(excluded(file), `${file} is kept out of the build context by deploy/Dockerfile.dockerignore`).to.equal(
          false,
        );
      }
      expect(
        excluded("node_modules/x") && excluded("services/identity/node_modules/x") && excluded("test/deploy.test.ts"),
        "the ignore file works as read",
      ).to.equal(true);
    });

    it("the image holds every file the processes read at run time", () => {
      // Found through a workspace package (import.meta.resolve("@switchyard/<workspace>/<path>")), the same from the sources and the bundle.
      const sources = rootPackage.workspaces.flatMap((ws) =>
        filesUnder(join(ROOT, ws)).filter(
          (f) => /\.(ts|mjs|js)$/.test(f) && !f.includes("node_modules") && !f.includes("/test/"),
        ),
      );
      let found = 0;
      for (const file of sources) {
        for (const m of read(file).matchAll(
          /import\.meta\.resolve\(\s*["'`]@switchyard\/([\w-]+)\/([^"'`]+)["'`]\s*\)/g,
        )) {
          const ws = required(
            rootPackage.workspaces.find((w) => w.split("/").pop() === m[1]),
            `workspace ${m[1]}`,
          );
          // A template (openapi/v${major}.yaml): the folder it names is what the image must hold.
          const target = m[2]!.includes("${") ? `${ws}/${posix.dirname(m[2]!)}` : `${ws}/${m[2]}`;
          expect(existsSync(join(ROOT, target)), `${rel(file)} reads ${target}`).to.equal(true);
          expect(
            copied(runtime).some((c) => target === c || target.startsWith(`${c}/`)),
            `the image holds ${target} (read by ${rel(file)})`,
          ).to.equal(true);
          found++;
        }
      }
      expect(found, "the gateway reads its OpenAPI document").to.be.greaterThan(0);
    });

    it("every package the runtime imports is a production dependency; tsx is not", () => {
      const workspaceNames = new Set(
        rootPackage.workspaces.map((ws) => (JSON.parse(read(join(ROOT, ws, "package.json"))) as { name: string }).name),
      );
      const dependencies = new Set(Object.keys(rootPackage.dependencies ?? {}));
      const sources = rootPackage.workspaces.flatMap((ws) => {
        const src = join(ROOT, ws, "src");
        return filesUnder(existsSync(src) ? src : join(ROOT, ws)).filter(
          (f) =>
            /\.(ts|js|mjs)$/.test(f) && !f.endsWith(".d.ts") && !f.includes("node_modules") && !f.includes("/test/"),
        );
      });
      expect(sources.length).to.be.greaterThan(10);
      const missing: string[] = [];
      for (const file of sources) {
        const source = read(file);
        const specifiers = [
          ...[...source.matchAll(/^\s*(?:import|export)\s+(type\s+)?(?:[^;'"()=]*?\sfrom\s*)?["']([^"']+)["']/gm)]
            .filter((m) => !m[1])
            .map((m) => m[2]!),
          ...[...source.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1]!),
          // Files read from a package at run time (the gateway serves Redoc's bundle from `redoc`).
          ...[...source.matchAll(/\bimport\.meta\.resolve\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1]!),
        ];
        for (const s of specifiers) {
          if (
            s.startsWith(".") ||
            s.startsWith("/") ||
            s.startsWith("node:") ||
            builtinModules.includes(s.split("/")[0]!)
          )
            continue;
          const pkg = s.startsWith("@") ? s.split("/").slice(0, 2).join("/") : s.split("/")[0]!;
          if (!workspaceNames.has(pkg) && !dependencies.has(pkg)) missing.push(`${pkg} (imported by ${rel(file)})`);
        }
      }
      expect(missing, "left out of the image").to.deep.equal([]);
      expect(dependencies.has("tsx"), "tsx is a development tool, not a production dependency").to.equal(false);
    });
  });
});
