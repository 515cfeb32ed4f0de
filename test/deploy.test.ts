// deploy/ cannot be run here (no container engine, no cluster, no Envoy binary), so it is held to
// the code statically: the manifests may only set real settings of each process, with values those
// settings accept; ports, probes, upstream addresses and drain timing follow the code's defaults; the
// image installs every package the runtime imports; Envoy's timeout stays above the gateway's deadline.
// When kubectl is on PATH, the kustomize overlay is also built.
import { expect } from "chai";
import { spawnSync } from "node:child_process";
import { accessSync, constants, existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { builtinModules } from "node:module";
import { delimiter, dirname, join, posix, relative } from "node:path";
import { parse as parseYaml, parseAllDocuments } from "yaml";
import { identitySettings } from "@switchyard/identity";
import { paymentsSettings } from "@switchyard/payments";
import { ordersSettings } from "@switchyard/orders";
import { contentSettings } from "@switchyard/content";
import { gatewaySettings } from "@switchyard/gateway";
import { isErrorReason } from "@switchyard/platform/errors.js";
import { HTTP_STATUS } from "@switchyard/gateway/runtime/errors.js";
import type { Setting } from "@switchyard/platform/config.js";

const ROOT = new URL("..", import.meta.url).pathname;
const DEPLOY = join(ROOT, "deploy");
const K8S_BASE = join(DEPLOY, "k8s", "base");
const LOCAL_OVERLAY = join(DEPLOY, "k8s", "overlays", "local");

const read = (path: string) => readFileSync(path, "utf8");
const rel = (path: string) => relative(ROOT, path).split("\\").join("/");

// ---- the processes, described by the code --------------------------------------------------------

type Spec = Record<string, Setting<unknown>>;

interface Process {
  name: "identity" | "payments" | "orders" | "content" | "gateway";
  settings: Spec;
  /** how Kubernetes should probe it */
  probes: "grpc" | "http";
  /** The bundle it runs (`npm run build`, in the image's build stage). */
  entry: string;
  hasDatabase: boolean;
}

const PROCESSES: Process[] = [
  { name: "identity", settings: identitySettings, probes: "grpc", entry: "dist/identity.js", hasDatabase: true },
  { name: "payments", settings: paymentsSettings, probes: "grpc", entry: "dist/payments.js", hasDatabase: true },
  { name: "orders", settings: ordersSettings, probes: "grpc", entry: "dist/orders.js", hasDatabase: true },
  { name: "content", settings: contentSettings, probes: "grpc", entry: "dist/content.js", hasDatabase: true },
  { name: "gateway", settings: gatewaySettings, probes: "http", entry: "dist/gateway.js", hasDatabase: false },
];

function settingByEnv(spec: Spec): Map<string, Setting<unknown>> {
  return new Map(Object.values(spec).map((s) => [s.env, s]));
}

function required<T>(value: T | undefined, what: string): T {
  expect(value, what).to.not.equal(undefined);
  return value as T;
}

function defaultPort(p: Process): number {
  const port = required(p.settings.port, `${p.name} has a port setting`).fallback;
  expect(port, `${p.name}'s port setting has a default`).to.be.a("number");
  return port as number;
}

// ---- Kubernetes manifests ------------------------------------------------------------------------

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean } };
}
interface Probe {
  grpc?: { port: number; service?: string };
  httpGet?: { path: string; port: number | string };
}
interface Container {
  name: string;
  image?: string;
  command?: string[];
  args?: string[];
  ports?: { name?: string; containerPort: number }[];
  env?: EnvVar[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: { runAsNonRoot?: boolean; readOnlyRootFilesystem?: boolean; allowPrivilegeEscalation?: boolean };
  volumeMounts?: { name: string; mountPath: string }[];
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  startupProbe?: Probe;
  lifecycle?: { preStop?: { exec?: { command?: string[] } } };
}
interface PodSpec {
  containers: Container[];
  enableServiceLinks?: boolean;
  terminationGracePeriodSeconds?: number;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number };
  volumes?: { name: string; emptyDir?: object }[];
}
type Labels = Record<string, string>;
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Labels };
}
interface Deployment extends K8sObject {
  spec: { replicas?: number; selector: { matchLabels: Labels }; template: { metadata: { labels: Labels }; spec: PodSpec } };
}
interface Service extends K8sObject {
  spec: { selector: Labels; ports: { name?: string; port: number; targetPort?: number | string }[] };
}
interface Budget extends K8sObject {
  spec: { selector: { matchLabels: Labels }; minAvailable?: number | string; maxUnavailable?: number | string };
}
interface Kustomization {
  resources?: string[];
}

function loadDocuments(path: string): K8sObject[] {
  return parseAllDocuments(read(path)).map((doc) => {
    expect(doc.errors, `${rel(path)} parses`).to.deep.equal([]);
    return doc.toJS() as K8sObject;
  });
}

function kustomizationsUnder(dir: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...kustomizationsUnder(path));
    else if (entry.name === "kustomization.yaml") found.push(path);
  }
  return found;
}

const baseKustomization = parseYaml(read(join(K8S_BASE, "kustomization.yaml"))) as Kustomization;
const baseObjects: K8sObject[] = (baseKustomization.resources ?? [])
  .filter((r) => /\.ya?ml$/.test(r) && existsSync(join(K8S_BASE, r)))
  .flatMap((r) => loadDocuments(join(K8S_BASE, r)));
const services = baseObjects.filter((o): o is Service => o.kind === "Service");

const selects = (selector: Labels, labels: Labels) => Object.entries(selector).every(([k, v]) => labels[k] === v);

interface Manifest {
  objects: K8sObject[];
  deployment: Deployment;
  service: Service;
  budget: Budget;
  container: Container;
}

function manifestOf(p: Process): Manifest {
  const file = join(K8S_BASE, `${p.name}.yaml`);
  expect(existsSync(file), `${rel(file)} exists`).to.equal(true);
  const objects = loadDocuments(file);
  const ofKind = (kind: string) => objects.filter((o) => o.kind === kind);
  expect(ofKind("Deployment"), `${p.name}.yaml: Deployments`).to.have.length(1);
  expect(ofKind("Service"), `${p.name}.yaml: Services`).to.have.length(1);
  expect(ofKind("PodDisruptionBudget"), `${p.name}.yaml: PodDisruptionBudgets`).to.have.length(1);
  const deployment = ofKind("Deployment")[0] as Deployment;
  const containers = deployment.spec.template.spec.containers;
  expect(containers, `${p.name}: containers`).to.have.length(1);
  return { objects, deployment, service: ofKind("Service")[0] as Service, budget: ofKind("PodDisruptionBudget")[0] as Budget, container: containers[0]! };
}

function envOf(container: Container): Map<string, EnvVar> {
  const env = new Map<string, EnvVar>();
  for (const e of container.env ?? []) {
    expect(env.has(e.name), `${container.name} sets ${e.name} once`).to.equal(false);
    env.set(e.name, e);
  }
  return env;
}

function literal(env: Map<string, EnvVar>, name: string): string | undefined {
  const e = env.get(name);
  return e?.value;
}

/** A probe's or Service's port, by number or by the container port's name. */
function resolvePort(container: Container, port: number | string | undefined): number | undefined {
  if (typeof port === "number") return port;
  return container.ports?.find((p) => p.name === port)?.containerPort;
}

function scriptOf(command: string[]): string | undefined {
  return command.find((arg) => /\.(ts|js|mjs)$/.test(arg));
}

function onPath(command: string): boolean {
  return (process.env.PATH ?? "").split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, command), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** Envoy / Go-style durations ("6s", "0.5s", "250ms") in milliseconds. */
function durationMs(value: unknown): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)$/.exec(String(value));
  expect(m, `"${String(value)}" is a duration`).to.not.equal(null);
  return Number(m![1]) * { ms: 1, s: 1_000, m: 60_000 }[m![2] as "ms" | "s" | "m"];
}

// ---- the Dockerfile ------------------------------------------------------------------------------

interface Instruction {
  keyword: string;
  args: string;
}
interface Stage {
  from: string;
  name?: string;
  instructions: Instruction[];
}

function parseDockerfile(text: string): { args: Map<string, string>; stages: Stage[] } {
  const lines = text.replace(/\\\r?\n/g, " ").split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("#"));
  const args = new Map<string, string>();
  const stages: Stage[] = [];
  for (const line of lines) {
    const m = /^(\w+)\s+([\s\S]*)$/.exec(line);
    if (!m) continue;
    const keyword = m[1]!.toUpperCase();
    const rest = m[2]!.trim();
    if (keyword === "FROM") {
      const [image = "", , name] = rest.split(/\s+/);
      const from = image.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a?: string, b?: string) => args.get((a ?? b)!) ?? "");
      stages.push({ from, ...(name ? { name } : {}), instructions: [] });
    } else if (stages.length === 0 && keyword === "ARG") {
      const [key, value = ""] = rest.split("=");
      args.set(key!.trim(), value.trim());
    } else {
      stages.at(-1)?.instructions.push({ keyword, args: rest });
    }
  }
  return { args, stages };
}

/** COPY sources (repository-relative) of a stage, leaving out copies from other stages. */
function copiedFromContext(stage: Stage): string[] {
  return stage.instructions
    .filter((i) => i.keyword === "COPY" && !/--from=/.test(i.args))
    .flatMap((i) => {
      const words = i.args.split(/\s+/).filter((w) => !w.startsWith("--"));
      return words.slice(0, -1).map((w) => posix.normalize(w).replace(/\/$/, ""));
    });
}

/** Paths a stage copies from another stage (`COPY --from=build /app/dist dist` → "dist"). */
function copiedFromBuild(stage: Stage): string[] {
  return stage.instructions
    .filter((i) => i.keyword === "COPY" && /--from=build\b/.test(i.args))
    .flatMap((i) => {
      const words = i.args.split(/\s+/).filter((w) => !w.startsWith("--"));
      return [posix.normalize(words.at(-1)!).replace(/\/$/, "")];
    });
}

const covered = (sources: string[], path: string) => sources.some((s) => s === "." || path === s || path.startsWith(`${s}/`));

const dockerfile = parseDockerfile(read(join(DEPLOY, "Dockerfile")));
const finalStage = dockerfile.stages.at(-1)!;

// ---- the runtime's source ------------------------------------------------------------------------

const rootPackage = JSON.parse(read(join(ROOT, "package.json"))) as {
  workspaces: string[];
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
};

/** The code the processes run: each workspace's src/ (gen/ has no src/: all of it). */
function runtimeFiles(): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== "node_modules" && entry.name !== "test") walk(path);
      } else if (/\.(ts|js|mjs)$/.test(entry.name) && !entry.name.endsWith(".d.ts")) files.push(path);
    }
  };
  for (const ws of rootPackage.workspaces) {
    const src = join(ROOT, ws, "src");
    walk(existsSync(src) ? src : join(ROOT, ws));
  }
  return files;
}

/** Package names a file needs at run time (type-only imports are erased). */
function runtimeImports(source: string): string[] {
  const specifiers: string[] = [];
  for (const m of source.matchAll(/^\s*(?:import|export)\s+(type\s+)?(?:[^;'"()=]*?\sfrom\s*)?["']([^"']+)["']/gm)) {
    if (!m[1]) specifiers.push(m[2]!);
  }
  for (const m of source.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g)) specifiers.push(m[1]!);
  return specifiers
    .filter((s) => !s.startsWith(".") && !s.startsWith("/") && !s.startsWith("node:") && !builtinModules.includes(s.split("/")[0]!))
    .map((s) => (s.startsWith("@") ? s.split("/").slice(0, 2).join("/") : s.split("/")[0]!));
}

// ==================================================================================================

describe("deploy/", function () {
  this.timeout(60_000);

  describe("kustomize", () => {
    it("every kustomization's resources exist", () => {
      const kustomizations = kustomizationsUnder(join(DEPLOY, "k8s"));
      expect(kustomizations.map(rel)).to.include.members(["deploy/k8s/base/kustomization.yaml", "deploy/k8s/overlays/local/kustomization.yaml"]);
      for (const file of kustomizations) {
        const resources = (parseYaml(read(file)) as Kustomization).resources ?? [];
        expect(resources, `${rel(file)} lists resources`).to.not.be.empty;
        for (const r of resources) {
          const path = join(dirname(file), r);
          expect(existsSync(path), `${rel(file)}: resource ${r} exists`).to.equal(true);
          if (statSync(path).isDirectory()) expect(existsSync(join(path, "kustomization.yaml")), `${rel(path)} is a kustomization`).to.equal(true);
        }
      }
    });

    it("the base lists one manifest file per process", () => {
      expect(baseKustomization.resources).to.include.members(PROCESSES.map((p) => `${p.name}.yaml`));
    });

    it("the local overlay builds (kubectl kustomize)", () => {
      if (!onPath("kubectl")) {
        console.log("  (kubectl not installed: kustomize build check skipped)");
        return;
      }
      const built = spawnSync("kubectl", ["kustomize", LOCAL_OVERLAY], { encoding: "utf8", timeout: 50_000 });
      expect(built.error, "kubectl ran").to.equal(undefined);
      expect(built.status, `kubectl kustomize failed: ${built.stderr}`).to.equal(0);
      const objects = parseAllDocuments(built.stdout).map((d) => d.toJS() as K8sObject);
      const deployments = objects.filter((o): o is Deployment => o.kind === "Deployment");
      expect(deployments.map((d) => d.metadata.name).sort()).to.deep.equal(PROCESSES.map((p) => p.name).sort());
    });
  });

  for (const p of PROCESSES) {
    describe(`${p.name} manifest`, () => {
      it("has one Deployment, one Service and one PodDisruptionBudget, all selecting its pods", () => {
        const { deployment, service, budget } = manifestOf(p);
        const podLabels = deployment.spec.template.metadata.labels;
        expect(deployment.spec.selector.matchLabels, "Deployment selector").to.not.be.empty;
        expect(selects(deployment.spec.selector.matchLabels, podLabels), "Deployment selects its own pods").to.equal(true);
        expect(service.spec.selector, "Service selector").to.not.be.empty;
        expect(selects(service.spec.selector, podLabels), "Service selects the pods").to.equal(true);
        expect(selects(budget.spec.selector.matchLabels, podLabels), "PodDisruptionBudget selects the pods").to.equal(true);
        expect(service.metadata.name, "Service name").to.equal(p.name);
        for (const other of PROCESSES.filter((o) => o !== p)) {
          const otherLabels = manifestOf(other).deployment.spec.template.metadata.labels;
          expect(selects(service.spec.selector, otherLabels), `${p.name} Service must not select ${other.name} pods`).to.equal(false);
        }
      });

      it("runs two replicas with resource requests and limits", () => {
        const { deployment, container } = manifestOf(p);
        expect(deployment.spec.replicas).to.equal(2);
        for (const kind of ["requests", "limits"] as const) {
          expect(container.resources?.[kind], `resources.${kind}`).to.include.keys("cpu", "memory");
        }
      });

      it("runs its own entrypoint, which exists and is in the image", () => {
        const { container } = manifestOf(p);
        const command = [...(container.command ?? []), ...(container.args ?? [])];
        expect(command.slice(0, 2), "plain node on the compiled bundle").to.deep.equal(["node", "--enable-source-maps"]);
        const script = required(scriptOf(command), "command names a script");
        expect(script).to.equal(p.entry);
        expect(existsSync(join(ROOT, script)), `${script} exists (built by npm run build)`).to.equal(true);
        expect(covered(copiedFromBuild(finalStage), script), `the image copies ${script} from the build stage`).to.equal(true);
        expect(container.image, "image").to.match(/^switchyard(:|$)/);
      });

      it("listens on its port setting's default, exposed by the Service", () => {
        const { container, service } = manifestOf(p);
        const port = defaultPort(p);
        expect(container.ports?.map((cp) => cp.containerPort)).to.deep.equal([port]);
        const portEnv = literal(envOf(container), p.settings.port!.env);
        if (portEnv !== undefined) expect(Number(portEnv), `${p.settings.port!.env}`).to.equal(port);
        expect(service.spec.ports).to.have.length(1);
        const servicePort = service.spec.ports[0]!;
        expect(servicePort.port, "Service port").to.equal(port);
        expect(resolvePort(container, servicePort.targetPort ?? servicePort.port), "Service targetPort").to.equal(port);
      });

      it("sets only real settings of the process, with values they accept", () => {
        const { container } = manifestOf(p);
        const known = settingByEnv(p.settings);
        const env = envOf(container);
        expect(env.size, "sets some settings").to.be.greaterThan(0);
        for (const [name, e] of env) {
          const setting = known.get(name);
          expect(setting, `${name} is a setting of ${p.name} (one of ${[...known.keys()].join(", ")})`).to.not.equal(undefined);
          if (e.value !== undefined) expect(() => setting!.parse(e.value!), `${name}=${e.value}`).to.not.throw();
          else expect(e.valueFrom?.secretKeyRef, `${name} is a literal or comes from a Secret`).to.not.equal(undefined);
        }
      });

      it("sets every setting the process cannot start without", () => {
        const env = envOf(manifestOf(p).container);
        for (const s of Object.values(p.settings)) {
          if (s.fallback === undefined && !s.optional && s.env !== "DATABASE_URL") expect(env.has(s.env), `${s.env} is required by ${p.name}`).to.equal(true);
        }
      });

      it("binds every interface and overrides every loopback default", () => {
        const { container } = manifestOf(p);
        const env = envOf(container);
        expect(literal(env, p.settings.host!.env), p.settings.host!.env).to.equal("0.0.0.0");
        for (const s of Object.values(p.settings)) {
          if (typeof s.fallback === "string" && /^(127\.0\.0\.1|localhost)\b/.test(s.fallback)) {
            expect(env.has(s.env), `${s.env} defaults to ${s.fallback}, unreachable in a pod`).to.equal(true);
          }
        }
      });

      it("addresses its upstreams by Service name and port", () => {
        const { container } = manifestOf(p);
        const addresses = [...envOf(container)].filter(([name]) => name.endsWith("_ADDRESS"));
        if (p.name !== "identity") expect(addresses, `${p.name} has upstreams`).to.not.be.empty;
        for (const [name, e] of addresses) {
          const [host, port] = required(e.value, name).split(":");
          const target = PROCESSES.find((t) => name === `${t.name.toUpperCase()}_ADDRESS`);
          expect(target, `${name} names a process`).to.not.equal(undefined);
          expect(host, `${name} host`).to.equal(target!.name);
          const service = services.find((s) => s.metadata.name === host);
          expect(service, `a Service named ${host}`).to.not.equal(undefined);
          const servicePort = service!.spec.ports.find((sp) => sp.port === Number(port));
          expect(servicePort, `Service ${host} exposes port ${port}`).to.not.equal(undefined);
          const targetManifest = manifestOf(target!);
          expect(resolvePort(targetManifest.container, servicePort!.targetPort ?? servicePort!.port), `${name} reaches ${target!.name}'s container port`).to.equal(defaultPort(target!));
        }
      });

      if (p.hasDatabase) {
        it("reads DATABASE_URL from the Secret and owns its schema", () => {
          const { container } = manifestOf(p);
          const env = envOf(container);
          const url = required(env.get(p.settings.databaseUrl!.env), "DATABASE_URL is set");
          expect(url.value, "DATABASE_URL is no literal").to.equal(undefined);
          // Its own role's URL: the role reaches only this service's schema (deploy/postgres/roles.sql).
          expect(url.valueFrom?.secretKeyRef).to.deep.include({ name: "switchyard-database", key: `${p.name}-url` });
          expect(url.valueFrom?.secretKeyRef?.optional, "the Secret is required").to.not.equal(true);
          expect(literal(env, p.settings.databaseSchema!.env), p.settings.databaseSchema!.env).to.equal(p.settings.databaseSchema!.fallback);
        });
      }

      it(p.probes === "grpc" ? "is probed over grpc.health.v1 on its port" : "is probed on /readyz and /healthz", () => {
        const { container } = manifestOf(p);
        const port = defaultPort(p);
        const readiness = required(container.readinessProbe, "readinessProbe");
        const liveness = required(container.livenessProbe, "livenessProbe");
        if (p.probes === "grpc") {
          for (const [what, probe] of [["readiness", readiness], ["liveness", liveness], ["startup", container.startupProbe ?? readiness]] as const) {
            expect(probe.grpc?.port, `${what} grpc probe port`).to.equal(port);
            expect(probe.grpc?.service ?? "", `${what} probes the overall service`).to.equal("");
          }
        } else {
          expect(readiness.httpGet?.path).to.equal("/readyz");
          expect(resolvePort(container, readiness.httpGet?.port), "readiness port").to.equal(port);
          expect(liveness.httpGet?.path).to.equal("/healthz");
          expect(resolvePort(container, liveness.httpGet?.port), "liveness port").to.equal(port);
        }
      });

      it("drains before the grace period ends, after endpoints are removed", () => {
        const { deployment, container } = manifestOf(p);
        const drainEnv = p.settings.drainTimeoutMs!.env;
        const drainMs = Number(required(literal(envOf(container), drainEnv), `${drainEnv} is set`));
        const preStop = required(container.lifecycle?.preStop?.exec?.command, "preStop exec command");
        expect(preStop[0], "preStop sleeps").to.equal("sleep");
        const sleepMs = Number(preStop[1]) * 1000;
        expect(sleepMs, "preStop sleep").to.be.greaterThan(0);
        const graceMs = required(deployment.spec.template.spec.terminationGracePeriodSeconds, "terminationGracePeriodSeconds") * 1000;
        expect(graceMs, `grace period > ${drainEnv}`).to.be.greaterThan(drainMs);
        expect(graceMs, `grace period > preStop sleep + ${drainEnv}`).to.be.greaterThan(sleepMs + drainMs);
      });

      it("runs as non-root on a read-only root filesystem, with a writable /tmp", () => {
        const { deployment, container } = manifestOf(p);
        const pod = deployment.spec.template.spec;
        expect(container.securityContext?.runAsNonRoot ?? pod.securityContext?.runAsNonRoot, "runAsNonRoot").to.equal(true);
        expect(container.securityContext?.readOnlyRootFilesystem, "readOnlyRootFilesystem").to.equal(true);
        expect(container.securityContext?.allowPrivilegeEscalation, "allowPrivilegeEscalation").to.equal(false);
        // tsx keeps its transform cache in os.tmpdir() and cannot start without it.
        const tmp = required(container.volumeMounts?.find((m) => m.mountPath === "/tmp"), "a volume at /tmp");
        expect(pod.volumes?.find((v) => v.name === tmp.name)?.emptyDir, "/tmp is an emptyDir").to.not.equal(undefined);
      });

      it("gets no Service-link variable that collides with a setting", () => {
        const { deployment, container } = manifestOf(p);
        const known = settingByEnv(p.settings);
        const env = envOf(container);
        // Kubernetes injects <SERVICE>_PORT=tcp://ip:port (and more) for every Service in the namespace.
        const collisions = services
          .map((s) => `${s.metadata.name.toUpperCase().replace(/-/g, "_")}_PORT`)
          .filter((name) => known.has(name) && !env.has(name));
        if (collisions.length > 0) expect(deployment.spec.template.spec.enableServiceLinks, `enableServiceLinks (${collisions.join(", ")})`).to.equal(false);
      });
    });
  }

  describe("secrets of identity", () => {
    it("seals its signing keys under a key from a Secret (required with a database server)", () => {
      const env = envOf(manifestOf(PROCESSES.find((p) => p.name === "identity")!).container);
      const key = required(env.get(identitySettings.keyEncryptionKey.env), "SIGNING_KEY_ENCRYPTION_KEY is set");
      expect(key.value, "never a literal").to.equal(undefined);
      expect(key.valueFrom?.secretKeyRef?.name).to.be.a("string");
    });

    it("gives every service a database role of its own, created by the script deploy/README.md names", () => {
      const keys = PROCESSES.filter((p) => p.hasDatabase).map((p) => envOf(manifestOf(p).container).get("DATABASE_URL")?.valueFrom?.secretKeyRef?.key);
      expect(new Set(keys).size, "one URL (one role) per service").to.equal(keys.length);
      expect(read(join(DEPLOY, "README.md"))).to.include("deploy/postgres/roles.sql");
      expect(existsSync(join(DEPLOY, "postgres", "roles.sql"))).to.equal(true);
    });
  });

  describe("service credentials", () => {
    it("orders' secret and identity's client list come from one Secret, never a literal", () => {
      const ordersEnv = envOf(manifestOf(PROCESSES.find((p) => p.name === "orders")!).container);
      const identityEnv = envOf(manifestOf(PROCESSES.find((p) => p.name === "identity")!).container);
      const secret = required(ordersEnv.get(ordersSettings.serviceSecret.env), "ORDERS_SERVICE_SECRET is set").valueFrom?.secretKeyRef;
      const clients = required(identityEnv.get(identitySettings.serviceClients.env), "IDENTITY_SERVICE_CREDENTIALS is set").valueFrom?.secretKeyRef;
      expect(secret?.name, "from a Secret").to.be.a("string");
      expect(clients?.name, "the same Secret").to.equal(secret?.name);
      expect(clients?.key).to.not.equal(secret?.key);
      // No other process sees them.
      for (const p of PROCESSES.filter((q) => q.name !== "orders" && q.name !== "identity")) {
        const refs = [...envOf(manifestOf(p).container).values()].map((e) => e.valueFrom?.secretKeyRef?.name);
        expect(refs, `${p.name} reads no service credential`).to.not.include(secret?.name);
      }
    });
  });

  describe("no demo data", () => {
    it("no manifest sets the demo-data setting", () => {
      for (const p of PROCESSES) {
        const { container } = manifestOf(p);
        for (const env of [identitySettings.demoData.env, contentSettings.demoData.env, identitySettings.demoDataForce.env]) expect([...envOf(container).keys()]).to.not.include(env);
      }
    });

    it("nothing under deploy/ carries demo data or demo credentials", () => {
      const files: string[] = [];
      const walk = (dir: string) => {
        for (const entry of readdirSync(dir, { withFileTypes: true })) {
          const path = join(dir, entry.name);
          if (entry.isDirectory()) walk(path);
          else files.push(path);
        }
      };
      walk(DEPLOY);
      expect(files.length).to.be.greaterThan(5);
      for (const file of files) {
        const text = read(file);
        for (const needle of [identitySettings.demoData.env, contentSettings.demoData.env, identitySettings.demoDataForce.env, "demo-password", "@acme.test", "@globex.test"]) {
          expect(text, `${rel(file)} contains "${needle}"`).to.not.include(needle);
        }
      }
    });
  });

  describe("Dockerfile", () => {
    it("is multi-stage on the current Node LTS (24)", () => {
      expect(dockerfile.stages.length).to.be.greaterThan(1);
      for (const stage of dockerfile.stages) expect(stage.from).to.match(/^node:24-bookworm-slim(@sha256:[0-9a-f]{64})?$/);
    });

    it("builds the bundles in a stage of its own, with the dev dependencies", () => {
      const build = required(dockerfile.stages.find((s) => s.instructions.some((i) => i.keyword === "RUN" && /\bnpm run build\b/.test(i.args))), "a stage runs npm run build");
      expect(copiedFromBuild(finalStage)).to.include("dist");
      expect(build.instructions.some((i) => i.keyword === "RUN" && /\bnpm ci\b/.test(i.args) && !i.args.includes("--omit=dev")), "the build stage installs dev dependencies").to.equal(true);
    });

    it("runs as a non-root user with NODE_ENV=production", () => {
      const user = required(finalStage.instructions.filter((i) => i.keyword === "USER").at(-1), "USER in the final stage").args;
      expect(user.split(":")[0], "USER").to.match(/^[1-9]\d*$/);
      expect(finalStage.instructions.some((i) => i.keyword === "ENV" && /\bNODE_ENV=production\b/.test(i.args)), "ENV NODE_ENV=production").to.equal(true);
    });

    it("its CMD runs an entrypoint that exists", () => {
      const cmd = required(finalStage.instructions.filter((i) => i.keyword === "CMD").at(-1), "CMD").args;
      const command = JSON.parse(cmd) as string[];
      expect(command.slice(0, 2)).to.deep.equal(["node", "--enable-source-maps"]);
      const script = required(scriptOf(command), "CMD names a script");
      expect(existsSync(join(ROOT, script)), `${script} exists`).to.equal(true);
      expect(PROCESSES.map((p) => p.entry)).to.include(script);
    });

    it("copies only paths that exist, and every file the runtime reads", () => {
      const sources = copiedFromContext(finalStage);
      for (const s of sources) expect(existsSync(join(ROOT, s)), `COPY ${s}`).to.equal(true);
      for (const p of PROCESSES) expect(covered(copiedFromBuild(finalStage), p.entry), `the image holds ${p.entry}`).to.equal(true);
      // Files found next to the code at run time, e.g. the gateway's OpenAPI document, resolved
      // through its workspace package (the same from the sources and from the bundle).
      for (const file of runtimeFiles()) {
        for (const m of read(file).matchAll(/import\.meta\.resolve\(\s*["']@switchyard\/(\w+)\/([^"']+)["']\s*\)/g)) {
          const ws = required(rootPackage.workspaces.find((w) => w.split("/").pop() === m[1]), `workspace ${m[1]}`);
          const target = posix.join(ws, m[2]!);
          expect(existsSync(join(ROOT, target)), `${rel(file)} reads ${target}`).to.equal(true);
          expect(covered(sources, target), `the image holds ${target} (read by ${rel(file)})`).to.equal(true);
        }
      }
    });

    it("installs production dependencies with every workspace linked", () => {
      const deps = required(dockerfile.stages.find((s) => s.instructions.some((i) => i.keyword === "RUN" && /\bnpm ci\b.*--omit=dev/.test(i.args))), "a stage runs npm ci --omit=dev");
      const run = deps.instructions.find((i) => i.keyword === "RUN" && /\bnpm ci\b/.test(i.args))!;
      expect(run.args).to.include("--omit=dev");
      const copied = copiedFromContext(deps);
      for (const file of ["package.json", "package-lock.json", ...rootPackage.workspaces.map((ws) => `${ws}/package.json`)]) {
        expect(copied, `npm ci needs ${file}`).to.include(file);
      }
    });

    it("npm ci --omit=dev installs every package the runtime imports", () => {
      const workspaceNames = new Set(rootPackage.workspaces.map((ws) => (JSON.parse(read(join(ROOT, ws, "package.json"))) as { name: string }).name));
      const dependencies = new Set(Object.keys(rootPackage.dependencies ?? {}));
      const files = runtimeFiles();
      expect(files.length).to.be.greaterThan(10);
      const missing: string[] = [];
      for (const file of files) {
        for (const pkg of runtimeImports(read(file))) {
          if (workspaceNames.has(pkg) || dependencies.has(pkg)) continue;
          const why = rootPackage.devDependencies?.[pkg] ? "only a devDependency" : "not a dependency";
          missing.push(`${pkg} (${why}, imported by ${rel(file)})`);
        }
      }
      expect(missing, "left out of the image").to.deep.equal([]);
      expect(dependencies.has("tsx"), "nothing runs TypeScript at run time: tsx is only for tests and tools").to.equal(false);
    });
  });

  describe("Envoy", () => {
    // A deep config tree, navigated loosely.
    const envoy = parseYaml(read(join(DEPLOY, "envoy", "envoy.yaml"))) as any;
    const listeners = (envoy?.static_resources?.listeners ?? []) as any[];
    const clusters = (envoy?.static_resources?.clusters ?? []) as any[];
    const https = listeners.find((l) => l?.address?.socket_address?.port_value === 8443);
    const chain = https?.filter_chains?.[0];
    const hcm = chain?.filters?.find((f: any) => f?.name === "envoy.filters.network.http_connection_manager")?.typed_config;
    const routes = (hcm?.route_config?.virtual_hosts ?? []).flatMap((vh: any) => vh?.routes ?? []) as any[];
    const routeFor = (prefix: string) => routes.find((r) => r?.match?.prefix === prefix);
    const clusterPorts = (name: string) =>
      (clusters.find((c) => c?.name === name)?.load_assignment?.endpoints ?? []).flatMap((e: any) => (e?.lb_endpoints ?? []).map((l: any) => l?.endpoint?.address?.socket_address)) as { address: string; port_value: number }[];

    it("has a TLS listener on 8443 with certificates from /etc/envoy/tls", () => {
      expect(https, "listener on 8443").to.not.equal(undefined);
      expect(chain?.transport_socket?.typed_config?.["@type"]).to.equal("type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext");
      const certs = chain.transport_socket.typed_config.common_tls_context?.tls_certificates ?? [];
      expect(certs).to.not.be.empty;
      for (const c of certs) {
        expect(c.certificate_chain?.filename).to.match(/^\/etc\/envoy\/tls\//);
        expect(c.private_key?.filename).to.match(/^\/etc\/envoy\/tls\//);
      }
    });

    it("appends the client's address to X-Forwarded-For, and the gateway trusts exactly that one hop", () => {
      // use_remote_address: Envoy adds the peer it saw; with no trusted hops of its own it trusts nothing the client wrote.
      expect(hcm?.use_remote_address, "use_remote_address").to.equal(true);
      expect(hcm?.xff_num_trusted_hops ?? 0, "Envoy trusts no hop in front of it").to.equal(0);
      const gateway = PROCESSES.find((p) => p.name === "gateway")!;
      expect(literal(envOf(manifestOf(gateway).container), gatewaySettings.trustedProxyHops.env), gatewaySettings.trustedProxyHops.env).to.equal("1");
    });

    it("routes /v1/ to the gateway Service on the gateway's port, with a timeout above its deadline", () => {
      const route = routeFor("/v1/");
      expect(route, "a /v1/ route").to.not.equal(undefined);
      const endpoints = clusterPorts(route.route?.cluster);
      expect(endpoints, `endpoints of cluster ${route.route?.cluster}`).to.not.be.empty;
      const gateway = PROCESSES.find((p) => p.name === "gateway")!;
      const gatewayService = manifestOf(gateway).service;
      for (const e of endpoints) {
        expect(e.port_value, "endpoint port").to.equal(defaultPort(gateway));
        expect(e.address, "endpoint is the gateway Service").to.equal(gatewayService.metadata.name);
      }
      const manifestDeadline = literal(envOf(manifestOf(gateway).container), gatewaySettings.deadlineMs.env);
      const deadline = Math.max(gatewaySettings.deadlineMs.fallback!, Number(manifestDeadline ?? 0));
      expect(durationMs(route.route?.timeout), `route timeout vs ${gatewaySettings.deadlineMs.env}=${deadline}`).to.be.greaterThan(deadline);
    });

    it("has the gRPC-Web and CORS filters, the router last, and a /rpc/ route to the gateway with a CORS policy", () => {
      const filters = ((hcm?.http_filters ?? []) as any[]).map((f) => f?.name);
      expect(filters).to.include.members(["envoy.filters.http.grpc_web", "envoy.filters.http.cors"]);
      expect(filters.at(-1)).to.equal("envoy.filters.http.router");
      const rpc = routeFor("/rpc/");
      expect(rpc, "a /rpc/ route").to.not.equal(undefined);
      expect(rpc.route?.cluster).to.equal(routeFor("/v1/")?.route?.cluster);
      const cors = rpc.typed_per_filter_config?.["envoy.filters.http.cors"];
      expect(cors?.["@type"]).to.equal("type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy");
      expect(cors?.allow_origin_string_match, "allowed origins").to.not.be.empty;
    });

    it("health-checks the gateway on /healthz", () => {
      const cluster = clusters.find((c) => c?.name === routeFor("/v1/")?.route?.cluster);
      const paths = ((cluster?.health_checks ?? []) as any[]).map((h) => h?.http_health_check?.path);
      expect(paths).to.include("/healthz");
    });

    it("logs every request as JSON on stdout", () => {
      const logs = (hcm?.access_log ?? []) as any[];
      const stdout = logs.find((l) => l?.typed_config?.["@type"] === "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog");
      expect(stdout, "a stdout access log").to.not.equal(undefined);
      expect(stdout.typed_config.log_format?.json_format, "JSON format").to.be.an("object").that.is.not.empty;
      const logged = JSON.stringify(stdout.typed_config.log_format.json_format).toLowerCase();
      expect(logged, "no credentials in the access log").to.not.match(/authorization|cookie/);
    });

    it("answers its own /v1/ errors with catalogue codes and their statuses", () => {
      const mappers = (hcm?.local_reply_config?.mappers ?? []) as any[];
      expect(mappers).to.not.be.empty;
      for (const m of mappers) {
        const code = m?.body_format_override?.json_format?.code;
        expect(code, "mapper code").to.be.a("string");
        expect(isErrorReason(code), `${code} is in the error catalogue`).to.equal(true);
        // The status sent: the mapper's own, else the one its filter matches.
        const matched = JSON.stringify(m.filter).match(/"status_code_filter":\{"comparison":\{"op":"EQ","value":\{"default_value":(\d+)/g) ?? [];
        const status = m.status_code ?? (matched.length === 1 ? Number(/(\d+)$/.exec(matched[0]!)![1]) : undefined);
        expect(status, `the status of the ${code} reply`).to.equal(HTTP_STATUS[code as keyof typeof HTTP_STATUS]);
      }
      for (const r of routes.filter((r) => r?.direct_response)) {
        const body = JSON.parse(r.direct_response.body?.inline_string ?? "{}") as { error?: string; code?: string };
        expect(body.error, "direct response error").to.be.a("string");
        expect(isErrorReason(body.code ?? ""), `${body.code} is in the error catalogue`).to.equal(true);
        expect(r.direct_response.status).to.equal(HTTP_STATUS[body.code as keyof typeof HTTP_STATUS]);
      }
    });
  });
});
