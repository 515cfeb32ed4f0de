// deploy/envoy/envoy.yaml, without an Envoy binary: read strictly as envoy.config.bootstrap.v3.Bootstrap
// against Envoy's own API protos (built with buf from the copy inside @grpc/grpc-js-xds, see
// test/support/envoy-api.ts), so a misspelt field, a value of the wrong type or an unknown typed_config
// fails as `envoy --mode validate` would fail it; then held to the gateway: every route's timeout against
// the gateway's deadline, the live feed's route (found from the OpenAPI document) with no timeout but an
// idle timeout above the gateway's heartbeat, the trusted X-Forwarded-For hops, the upstream's name and
// port, the browser proxy's streams apart from its unary calls, retries only where a second attempt
// cannot repeat an effect, the circuit breakers' arithmetic, health checks and outlier detection, and
// Envoy's own error bodies against the error catalogue. Then held to its Deployment: the ConfigMap it
// runs is this file, its certificate comes by SDS from the mounted Secret, its probes, metrics and
// drain use listeners this file has, and the way in (a LoadBalancer) keeps the client's address.
import { expect } from "chai";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, posix } from "node:path";
import { parse as parseYaml } from "yaml";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { gatewaySettings } from "@switchyard/gateway";
import { isErrorReason } from "@switchyard/platform/errors.js";
import { HTTP_STATUS } from "@switchyard/gateway/runtime/errors.js";
import { DOCS_PATH, REDOC_ASSET, docsPathOf } from "@switchyard/gateway/docs.js";
import { publishedVersions } from "@switchyard/gateway/runtime/versions.js";
import { BROWSER_METHODS, RPC_PREFIX } from "@switchyard/gateway/rpc/allow-list.js";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { OrderService } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { envoyApi } from "./support/envoy-api.js";
import { render, type K8sObject } from "./support/kustomize.js";

const ROOT = new URL("..", import.meta.url).pathname;
const ENVOY_DIR = join(ROOT, "deploy", "envoy");
const ENVOY_YAML = join(ENVOY_DIR, "envoy.yaml");

/** Envoy reads YAML by converting it to JSON and parsing that as the proto's JSON form. */
function parseAs(typeName: string, config: unknown) {
  const api = envoyApi();
  const schema = api.registry.getMessage(typeName);
  if (!schema) throw new Error(`${typeName} is not in the registry`);
  return fromJson(schema, config as JsonValue, { registry: api.registry });
}
const parseBootstrap = (config: unknown) => parseAs("envoy.config.bootstrap.v3.Bootstrap", config);
/** A file-based xDS source (SDS here) holds a DiscoveryResponse. */
const parseDiscoveryResponse = (config: unknown) => parseAs("envoy.service.discovery.v3.DiscoveryResponse", config);

/** Envoy durations as protobuf JSON writes them ("6s", "0.5s", "0s") in milliseconds. */
function durationMs(value: unknown): number {
  const m = /^(\d+(?:\.\d+)?)s$/.exec(String(value));
  expect(m, `"${String(value)}" is a protobuf JSON duration`).to.not.equal(null);
  return Number(m![1]) * 1_000;
}

// ---- the gateway as deployed -----------------------------------------------------------------------

interface EnvVar {
  name: string;
  value?: string;
}
const production = render(join(ROOT, "deploy", "k8s", "overlays", "production")).objects;
const gatewayDeployment = production.find(
  (o) => o.kind === "Deployment" && o.metadata.name === "gateway",
) as K8sObject & {
  spec: { template: { spec: { containers: { env?: EnvVar[]; ports?: { containerPort: number }[] }[] } } };
};
const gatewayService = production.find((o) => o.kind === "Service" && o.metadata.name === "gateway") as K8sObject & {
  spec: { clusterIP?: string; ports: { port: number }[] };
};
const gatewayEnv = new Map(
  (gatewayDeployment?.spec.template.spec.containers[0]?.env ?? []).map((e) => [e.name, e.value]),
);
/** A gateway setting as deployed: the manifest's value, else the code's default. */
function deployed(setting: { env: string; fallback?: number }): number {
  const value = gatewayEnv.get(setting.env);
  return value !== undefined ? Number(value) : setting.fallback!;
}

// ---- the config, navigated loosely (after the strict parse has vouched for its shape) ---------------

const envoy = parseYaml(readFileSync(ENVOY_YAML, "utf8"));
const listeners = (envoy?.static_resources?.listeners ?? []) as any[];
const clusters = (envoy?.static_resources?.clusters ?? []) as any[];
const https = listeners.find((l) => l?.address?.socket_address?.port_value === 8443);
const chain = https?.filter_chains?.[0];
const clusterNamed = (name: string) => clusters.find((c) => c?.name === name);
/** The clusters that reach the gateway: unary requests, and streams (each holds its connection). */
const UNARY = "gateway";
const STREAMS = "gateway-streams";
const GATEWAY_CLUSTERS = [UNARY, STREAMS];
/** The routes of a listener's connection manager. */
const routesOf = (listener: any): any[] =>
  (listener?.filter_chains?.[0]?.filters?.[0]?.typed_config?.route_config?.virtual_hosts ?? []).flatMap(
    (vh: any) => vh?.routes ?? [],
  );
const hcm = chain?.filters?.find((f: any) => f?.name === "envoy.filters.network.http_connection_manager")?.typed_config;
const routes = (hcm?.route_config?.virtual_hosts ?? []).flatMap((vh: any) => vh?.routes ?? []) as any[];

/** The route Envoy picks for a request: the first whose path and header matchers all match. */
function routeFor(method: string, path: string, headers: Record<string, string>): any {
  const all: Record<string, string> = {
    ":method": method,
    ":path": path,
    ...Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])),
  };
  const stringMatches = (m: any, value: string | undefined): boolean => {
    if (value === undefined) return false;
    const [v, ignore] = [
      m.ignore_case ? value.toLowerCase() : value,
      (s: string) => (m.ignore_case ? s.toLowerCase() : s),
    ];
    if (m.exact !== undefined) return v === ignore(m.exact);
    if (m.prefix !== undefined) return v.startsWith(ignore(m.prefix));
    if (m.suffix !== undefined) return v.endsWith(ignore(m.suffix));
    if (m.contains !== undefined) return v.includes(ignore(m.contains));
    if (m.safe_regex !== undefined) return new RegExp(`^(?:${m.safe_regex.regex})$`).test(value);
    throw new Error(`string matcher ${JSON.stringify(m)} not understood by the test`);
  };
  return routes.find((r) => {
    const match = r?.match ?? {};
    const p = path.split("?")[0]!;
    const pathOk =
      match.prefix !== undefined
        ? p.startsWith(match.prefix)
        : match.path !== undefined
          ? p === match.path
          : match.path_separated_prefix !== undefined
            ? p === match.path_separated_prefix || p.startsWith(`${match.path_separated_prefix}/`)
            : match.safe_regex !== undefined
              ? new RegExp(`^(?:${match.safe_regex.regex})$`).test(p)
              : (() => {
                  throw new Error(`route match ${JSON.stringify(match)} not understood by the test`);
                })();
    if (!pathOk) return false;
    return ((match.headers ?? []) as any[]).every((h) => {
      const value = all[String(h.name).toLowerCase()];
      const matched = h.present_match !== undefined ? value !== undefined : stringMatches(h.string_match, value);
      return h.invert_match ? !matched : matched;
    });
  });
}

// ---- the API's operations, from the OpenAPI document -----------------------------------------------

interface Operation {
  method: string;
  path: string;
  stream: boolean;
}
// Every published version's document (gateway/openapi/v<N>.yaml): each of their operations must reach the gateway.
const OPENAPI_DIR = join(ROOT, "gateway", "openapi");
const operations: Operation[] = readdirSync(OPENAPI_DIR)
  .filter((f) => /^v\d+\.yaml$/.test(f))
  .flatMap((file) => {
    const openapi = parseYaml(readFileSync(join(OPENAPI_DIR, file), "utf8"));
    const resolveRef = (node: any): any =>
      node?.$ref
        ? resolveRef(
            String(node.$ref)
              .replace(/^#\//, "")
              .split("/")
              .reduce((n: any, k: string) => n?.[k], openapi),
          )
        : node;
    return Object.entries(openapi.paths ?? {}).flatMap(([path, item]: [string, any]) =>
      ["get", "put", "post", "patch", "delete"]
        .filter((m) => item?.[m])
        .map((m) => ({
          method: m.toUpperCase(),
          // A concrete request path: every template parameter filled in.
          path: path.replace(/\{[^}]+\}/g, "abc123"),
          stream: Object.values(item[m].responses ?? {}).some((r) =>
            Boolean(resolveRef(r)?.content?.["text/event-stream"]),
          ),
        })),
    );
  });

// ==================================================================================================

describe("deploy/envoy/envoy.yaml", function () {
  this.timeout(60_000);

  describe("as Envoy reads it (envoy.config.bootstrap.v3.Bootstrap, Envoy's own protos)", () => {
    it("parses strictly, every typed_config resolved", () => {
      const api = envoyApi();
      console.log(
        `      (${api.files} .proto files built with buf from @grpc/grpc-js-xds in ${api.ms} ms; left out, imports not shipped: ${api.leftOut.length})`,
      );
      const bootstrap = parseBootstrap(envoy) as any;
      expect(bootstrap.staticResources.listeners).to.have.length(listeners.length);
      expect(bootstrap.staticResources.clusters).to.have.length(clusters.length);
      // Every Any was resolved to its message (an unknown @type fails the parse).
      const types = JSON.stringify(envoy).match(/type\.googleapis\.com\/[\w.]+/g) ?? [];
      expect(types.length, "the Anys of the listener, connection manager, router and TLS context").to.be.at.least(4);
      for (const t of new Set(types)) expect(api.registry.getMessage(t.split("/")[1]!), t).to.not.equal(undefined);
    });

    const mutations: [string, (c: any) => void, RegExp][] = [
      [
        "a misspelt field of the connection manager (inside a typed_config)",
        (c) => {
          const h = c.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
          h.use_remote_adress = h.use_remote_address;
          delete h.use_remote_address;
        },
        /use_remote_adress/,
      ],
      [
        "a misspelt field of a route",
        (c) => {
          c.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[0].routes[0].route.idle_timout =
            "60s";
        },
        /idle_timout/,
      ],
      [
        "a misspelt field of an HTTP filter's config (an Any inside an Any)",
        (c) => {
          const router =
            c.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters.at(-1).typed_config;
          router.suppres_envoy_headers = true;
        },
        /suppres_envoy_headers/,
      ],
      [
        "a duration of the wrong type",
        (c) => {
          c.static_resources.clusters[0].connect_timeout = 1;
        },
        /connect_timeout|Duration/,
      ],
      [
        "a port that is not a number",
        (c) => {
          c.static_resources.listeners[0].address.socket_address.port_value = "https";
        },
        /port_value|uint32/,
      ],
      [
        "an enum value that does not exist",
        (c) => {
          c.static_resources.clusters[0].lb_policy = "ROUND_ROBBIN";
        },
        /lb_policy|ROUND_ROBBIN/,
      ],
      [
        "a typed_config of an unknown type",
        (c) => {
          c.static_resources.listeners[0].filter_chains[0].filters[0].typed_config["@type"] =
            "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManagr";
        },
        /HttpConnectionManagr/,
      ],
    ];
    for (const [what, mutate, message] of mutations) {
      it(`refuses ${what}`, () => {
        const copy = structuredClone(envoy);
        mutate(copy);
        expect(() => parseBootstrap(copy)).to.throw(message);
      });
    }
  });

  describe("against the gateway", () => {
    it("has a TLS listener on 8443 whose certificate comes by SDS from a file that watches its directory", () => {
      expect(https, "listener on 8443").to.not.equal(undefined);
      expect(chain?.transport_socket?.typed_config?.["@type"]).to.equal(
        "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
      );
      const context = chain.transport_socket.typed_config.common_tls_context ?? {};
      expect(context.tls_certificates, "no static certificate files (those are read once, at start)").to.equal(
        undefined,
      );
      const sds = (context.tls_certificate_sds_secret_configs ?? []) as any[];
      expect(sds).to.have.length(1);
      const source = sds[0].sds_config?.path_config_source;
      expect(source?.path, "a file-based SDS source").to.be.a("string");
      // The file is one of this directory's, shipped in the same ConfigMap (see "as deployed").
      const file = join(ENVOY_DIR, posix.basename(source.path));
      const response = parseYaml(readFileSync(file, "utf8"));
      expect(
        () => parseDiscoveryResponse(response),
        `${posix.basename(source.path)} parses as a DiscoveryResponse`,
      ).to.not.throw();
      const secret = (response.resources ?? []).find((r: any) => r?.name === sds[0].name);
      expect(secret?.["@type"]).to.equal("type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret");
      const certificate = secret.tls_certificate;
      const watched = certificate?.watched_directory?.path;
      expect(
        watched,
        "the certificate's directory is watched (a mounted Secret changes by a symbolic-link swap there)",
      ).to.be.a("string");
      expect(dirname(certificate.certificate_chain?.filename ?? "")).to.equal(watched);
      expect(dirname(certificate.private_key?.filename ?? "")).to.equal(watched);
    });

    it("refuses a misspelt field in the SDS file", () => {
      const response = parseYaml(readFileSync(join(ENVOY_DIR, "edge-certificate.yaml"), "utf8"));
      response.resources[0].tls_certificate.watched_directroy = response.resources[0].tls_certificate.watched_directory;
      expect(() => parseDiscoveryResponse(response)).to.throw(/watched_directroy/);
    });

    it("appends the client's address to X-Forwarded-For, and the gateway trusts exactly that one hop", () => {
      // use_remote_address: Envoy appends the peer it saw; it trusts no hop in front of it.
      expect(hcm?.use_remote_address, "use_remote_address").to.equal(true);
      expect(hcm?.xff_num_trusted_hops ?? 0, "Envoy trusts no hop in front of it").to.equal(0);
      // Proxies that append between the client and the gateway: Envoy alone.
      const appending = hcm?.use_remote_address ? 1 : 0;
      expect(gatewayEnv.get(gatewaySettings.trustedProxyHops.env), gatewaySettings.trustedProxyHops.env).to.equal(
        String(appending),
      );
    });

    it("sends every route to the gateway pods, each on its own (the headless gateway Service), on the gateway's port", () => {
      expect(gatewayService, "the gateway Service in overlays/production").to.not.equal(undefined);
      expect(gatewayService.spec.clusterIP, "headless: the name resolves to every ready pod").to.equal("None");
      const upstreams = new Set(routes.filter((r) => r?.route).map((r) => r.route.cluster));
      expect([...upstreams].sort()).to.deep.equal([...GATEWAY_CLUSTERS].sort());
      for (const name of GATEWAY_CLUSTERS) {
        const cluster = clusterNamed(name);
        expect(cluster?.type, `${name}: one host per address the name resolves to`).to.equal("STRICT_DNS");
        const endpoints = (cluster?.load_assignment?.endpoints ?? []).flatMap((e: any) =>
          (e?.lb_endpoints ?? []).map((l: any) => l?.endpoint?.address?.socket_address),
        );
        expect(endpoints).to.have.length(1);
        for (const e of endpoints) {
          expect(e.address, `${name}: endpoint is the gateway Service`).to.equal(gatewayService.metadata.name);
          expect(e.port_value, "endpoint port").to.equal(gatewayService.spec.ports[0]!.port);
          expect(e.port_value, "the gateway's port").to.equal(gatewaySettings.port.fallback);
        }
      }
    });

    it("the OpenAPI document has live streams, and every /v1 operation reaches the gateway (a live stream through the streams' cluster)", () => {
      expect(
        operations.filter((op) => op.stream).map((op) => `${op.method} ${op.path}`),
        "operations offering text/event-stream",
      ).to.include("GET /v1/posts");
      for (const op of operations) {
        for (const accept of ["application/json", "text/event-stream"]) {
          const route = routeFor(op.method, `${op.path}?limit=1`, { accept });
          const stream = op.stream && accept === "text/event-stream";
          expect(route?.route?.cluster, `${op.method} ${op.path} (${accept})`).to.equal(stream ? STREAMS : UNARY);
        }
      }
    });

    it("a live stream gets no response timeout but an idle timeout above the gateway's heartbeat", () => {
      const heartbeat = deployed(gatewaySettings.heartbeatMs);
      for (const op of operations.filter((o) => o.stream)) {
        for (const accept of [
          "text/event-stream",
          "text/event-stream; charset=utf-8",
          "application/json;q=0.5, text/event-stream",
        ]) {
          const route = routeFor(op.method, `${op.path}?limit=1`, { accept });
          const what = `${op.method} ${op.path} (Accept: ${accept}) → route ${route?.name}`;
          expect(route?.route?.timeout, `${what}: timeout`).to.equal("0s");
          expect(
            durationMs(route?.route?.idle_timeout),
            `${what}: idle_timeout vs GATEWAY_SSE_HEARTBEAT_MS=${heartbeat}`,
          ).to.be.greaterThan(2 * heartbeat);
        }
      }
    });

    it("every other request gets a timeout above the gateway's deadline (its own 504 arrives first)", () => {
      const deadline = deployed(gatewaySettings.deadlineMs);
      for (const op of operations) {
        const accepts = op.stream ? ["application/json", ""] : ["application/json", "", "text/event-stream"];
        for (const accept of accepts) {
          const route = routeFor(op.method, op.path, accept ? { accept } : {});
          const what = `${op.method} ${op.path} (Accept: ${accept || "none"}) → route ${route?.name}`;
          const timeout = durationMs(route?.route?.timeout);
          expect(timeout, `${what}: timeout vs ${gatewaySettings.deadlineMs.env}=${deadline}`).to.be.greaterThan(
            deadline,
          );
        }
      }
    });

    it("sends /rpc/ to the gateway, which speaks gRPC-Web and Connect and answers CORS itself: no grpc_web or cors filter; each server-streaming method through the streams' cluster with no response timeout, each unary one with a timeout above the gateway's longest deadline", () => {
      const filters = ((hcm?.http_filters ?? []) as any[]).map((f) => f?.name);
      expect(filters, "the gateway translates gRPC-Web; a grpc_web filter would hand it plain gRPC").to.not.include(
        "envoy.filters.http.grpc_web",
      );
      expect(filters, "CORS headers come from the gateway (GATEWAY_CORS_ORIGINS), never twice").to.not.include(
        "envoy.filters.http.cors",
      );
      expect(filters.at(-1)).to.equal("envoy.filters.http.router");
      const services = [IdentityService, PaymentService, OrderService, ContentService];
      const maxDeadline = deployed(gatewaySettings.maxDeadlineMs);
      let streams = 0;
      for (const [typeName, methods] of Object.entries(BROWSER_METHODS)) {
        const service = services.find((s) => s.typeName === typeName)!;
        expect(service, typeName).to.not.equal(undefined);
        for (const name of methods) {
          const method = service.methods.find((m) => m.name === name)!;
          const path = `${RPC_PREFIX}/${typeName}/${name}`;
          const rpc = routeFor("POST", path, { "content-type": "application/json" });
          expect(rpc.typed_per_filter_config, `${path}: no per-route CORS policy`).to.equal(undefined);
          if (method.methodKind === "server_streaming") {
            streams++;
            expect(rpc?.route?.cluster, path).to.equal(STREAMS);
            expect(durationMs(rpc.route.timeout), `${path}: no response timeout`).to.equal(0);
            expect(durationMs(rpc.route.idle_timeout), `${path}: an idle timeout`).to.be.greaterThan(0);
          } else {
            expect(rpc?.route?.cluster, path).to.equal(UNARY);
            expect(
              durationMs(rpc.route.timeout),
              `${path}: timeout vs ${gatewaySettings.maxDeadlineMs.env}=${maxDeadline}`,
            ).to.be.greaterThan(maxDeadline);
          }
        }
      }
      expect(streams, "WatchPosts streams").to.equal(1);
    });

    it("sends the API reference (/docs, every version's page, its assets) to the gateway, and nothing that only begins like it", () => {
      const pages = [
        DOCS_PATH,
        `${DOCS_PATH}/`,
        ...publishedVersions(new Date()).map((v) => docsPathOf(`v${v.major}`)),
        REDOC_ASSET,
      ];
      for (const path of pages) {
        const route = routeFor("GET", path, { accept: "text/html" });
        expect(route?.route?.cluster, `GET ${path} → route ${route?.name}`).to.equal("gateway");
        expect(durationMs(route?.route?.timeout), `GET ${path}: timeout`).to.be.greaterThan(0);
      }
      for (const path of ["/docsx", "/documents"])
        expect(routeFor("GET", path, {})?.direct_response?.status, path).to.equal(404);
    });

    it("health-checks every gateway pod on /readyz (its own readiness: false while it drains)", () => {
      for (const name of GATEWAY_CLUSTERS) {
        const checks = (clusterNamed(name)?.health_checks ?? []) as any[];
        expect(
          checks.map((h) => h?.http_health_check?.path),
          name,
        ).to.deep.equal(["/readyz"]);
        expect(durationMs(checks[0].interval), `${name}: checked often enough to follow a rollout`).to.be.at.most(
          10_000,
        );
      }
    });

    it("ejects a pod Envoy cannot reach, never for the gateway's own 5xx answers (which every pod gives alike when a service behind it fails)", () => {
      for (const name of GATEWAY_CLUSTERS) {
        const o = clusterNamed(name)?.outlier_detection;
        expect(o, `${name}: outlier detection`).to.be.an("object");
        expect(o.split_external_local_origin_errors, "connection failures counted apart from answers").to.equal(true);
        expect(o.consecutive_local_origin_failure).to.be.within(1, 10);
        expect(o.enforcing_consecutive_local_origin_failure).to.equal(100);
        for (const answerBased of [
          "enforcing_consecutive_5xx",
          "enforcing_consecutive_gateway_failure",
          "enforcing_success_rate",
          "enforcing_failure_percentage",
        ]) {
          expect(o[answerBased] ?? 0, `${name}: ${answerBased}`).to.equal(0);
        }
        expect(o.max_ejection_percent, "never the whole cluster").to.be.within(1, 50);
      }
    });

    it("circuit breakers: streams and unary requests in pools of their own, sized against the gateway's own limit", () => {
      const thresholds = (name: string) => {
        const breakers = clusterNamed(name)?.circuit_breakers;
        const t = (breakers?.thresholds ?? []).find((x: any) => (x?.priority ?? "DEFAULT") === "DEFAULT");
        const perHost = (breakers?.per_host_thresholds ?? [])[0]?.max_connections;
        expect(t, `${name}: thresholds (Envoy's defaults are 1024 for everything)`).to.be.an("object");
        for (const field of ["max_connections", "max_requests", "max_pending_requests"])
          expect(t[field], `${name}.${field}`).to.be.a("number");
        expect(t.retry_budget ?? t.max_retries, `${name}: retries bounded`).to.not.equal(undefined);
        expect(perHost, `${name}: per-pod connections bounded`).to.be.a("number");
        return { ...t, perHost };
      };
      const unary = thresholds(UNARY);
      const streams = thresholds(STREAMS);
      // HTTP/1.1 upstream: a request in flight holds a connection, so the two limits are one.
      expect(
        clusterNamed(UNARY).typed_extension_protocol_options?.["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
          ?.explicit_http_config?.http_protocol_options,
      ).to.deep.equal({});
      for (const t of [unary, streams]) {
        expect(t.max_requests).to.equal(t.max_connections);
        expect(t.perHost, "one pod holds part of the pool, not all of it").to.be.lessThan(t.max_connections);
      }
      // With the fewest Envoy replicas the production overlay runs, a gateway pod can be sent at least as
      // many unary requests as its own adaptive limit admits: it, not Envoy, sheds (with its JSON 503).
      const envoyAutoscaler = production.find(
        (o) => o.kind === "HorizontalPodAutoscaler" && o.metadata.name === "envoy",
      ) as K8sObject & { spec: { minReplicas: number } };
      expect(envoyAutoscaler.spec.minReplicas * unary.perHost).to.be.at.least(deployed(gatewaySettings.concurrencyMax));
      // Every stream route is on the streams' cluster, every other route on the unary one.
      for (const r of routes.filter((x) => x?.route)) {
        const isStream = durationMs(r.route.timeout) === 0;
        expect(r.route.cluster, `route ${r.name}`).to.equal(isStream ? STREAMS : UNARY);
      }
    });

    it("retries only what cannot have had an effect: any method before it reached a gateway, GET and HEAD also after a reset; each retry on another pod", () => {
      const BEFORE_SENT = new Set(["connect-failure", "refused-stream"]);
      const requests = [
        ...operations.map((op) => ({
          method: op.method,
          path: op.path,
          accept: op.stream ? "text/event-stream" : "application/json",
        })),
        ...operations
          .filter((op) => op.method === "GET")
          .map((op) => ({ method: "HEAD", path: op.path, accept: "application/json" })),
        ...["GET", "POST", "PUT", "DELETE"].flatMap((method) =>
          [
            "/versions",
            DOCS_PATH,
            `${RPC_PREFIX}/switchyard.payments.v1.PaymentService/CreatePayment`,
            `${RPC_PREFIX}/switchyard.content.v1.ContentService/WatchPosts`,
          ].map((path) => ({ method, path, accept: "application/json" })),
        ),
      ];
      let readsRetriedAfterReset = 0;
      for (const { method, path, accept } of requests) {
        const route = routeFor(method, path, { accept });
        if (!route?.route) continue;
        const policy = route.route.retry_policy;
        const on = new Set(
          String(policy?.retry_on ?? "")
            .split(",")
            .filter(Boolean),
        );
        const what = `${method} ${path} → route ${route.name}: retry_on ${[...on].join(",")}`;
        expect(on.has("connect-failure"), `${what}: a refused connection is retried`).to.equal(true);
        if (method === "GET" || method === "HEAD") {
          if (on.has("reset")) readsRetriedAfterReset++;
        } else {
          for (const condition of on)
            expect(BEFORE_SENT.has(condition), `${what}: ${condition} may repeat a ${method}`).to.equal(true);
        }
        expect(
          (policy.retry_host_predicate ?? []).map((p: any) => p?.name),
          `${what}: on another pod`,
        ).to.include("envoy.retry_host_predicates.previous_hosts");
      }
      expect(readsRetriedAfterReset, "reads of /v1 are retried after a reset").to.be.greaterThan(10);
    });

    it("logs every request as JSON on stdout, without credentials", () => {
      const logs = (hcm?.access_log ?? []) as any[];
      const stdout = logs.find(
        (l) =>
          l?.typed_config?.["@type"] ===
          "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog",
      );
      expect(stdout, "a stdout access log").to.not.equal(undefined);
      expect(stdout.typed_config.log_format?.json_format, "JSON format")
        .to.be.an("object")
        .that.does.not.deep.equal({});
      expect(
        JSON.stringify(stdout.typed_config.log_format.json_format).toLowerCase(),
        "no credentials in the access log",
      ).to.not.match(/authorization|cookie/);
    });

    it("answers its own /v1/ errors and unknown paths with catalogue codes and their statuses", () => {
      const mappers = (hcm?.local_reply_config?.mappers ?? []) as any[];
      expect(mappers).to.not.have.lengthOf(0);
      for (const m of mappers) {
        const code = m?.body_format_override?.json_format?.code;
        expect(isErrorReason(code), `${code} is in the error catalogue`).to.equal(true);
        // The status sent: the mapper's own, else the one its filter matches.
        const matched =
          JSON.stringify(m.filter).match(
            /"status_code_filter":\{"comparison":\{"op":"EQ","value":\{"default_value":(\d+)/g,
          ) ?? [];
        const status = m.status_code ?? (matched.length === 1 ? Number(/(\d+)$/.exec(matched[0])![1]) : undefined);
        expect(status, `the status of the ${code} reply`).to.equal(HTTP_STATUS[code as keyof typeof HTTP_STATUS]);
      }
      for (const r of routes.filter((r) => r?.direct_response)) {
        const body = JSON.parse(r.direct_response.body?.inline_string ?? "{}") as { error?: string; code?: string };
        expect(body.error, "direct response error").to.be.a("string");
        expect(isErrorReason(body.code ?? ""), `${body.code} is in the error catalogue`).to.equal(true);
        expect(r.direct_response.status).to.equal(HTTP_STATUS[body.code as keyof typeof HTTP_STATUS]);
      }
      expect(routeFor("GET", "/admin", {})?.direct_response?.status).to.equal(404);
    });
  });

  describe("as deployed (deploy/k8s: the Envoy Deployment and the way in)", () => {
    for (const overlayName of ["local", "production"] as const) {
      describe(`overlays/${overlayName}`, () => {
        const objects =
          overlayName === "production"
            ? production
            : render(join(ROOT, "deploy", "k8s", "overlays", overlayName)).objects;
        const find = <T>(kind: string, name: string) =>
          objects.find((o) => o.kind === kind && o.metadata.name === name) as (K8sObject & T) | undefined;
        const deployment = find<{
          spec: {
            template: { metadata: { labels: Record<string, string>; annotations?: Record<string, string> }; spec: any };
          };
        }>("Deployment", "envoy")!;
        const pod = deployment?.spec.template.spec;
        const container = pod?.containers?.[0];
        const portOf = (name: string | number) =>
          typeof name === "number" ? name : container?.ports?.find((p: any) => p.name === name)?.containerPort;
        const listenerOn = (port: number) => listeners.find((l) => l?.address?.socket_address?.port_value === port);
        const mountOf = (volume: string) => container?.volumeMounts?.find((m: any) => m.name === volume);

        it("runs Envoy, pinned by digest, as a non-root user on a read-only root filesystem, with no API token", () => {
          expect(deployment, "Deployment envoy").to.not.equal(undefined);
          expect(container.image).to.match(/^envoyproxy\/envoy:v\d+\.\d+\.\d+@sha256:[a-f0-9]{64}$/);
          expect(pod.securityContext?.runAsNonRoot).to.equal(true);
          expect(pod.securityContext?.runAsUser).to.be.greaterThan(0);
          expect(pod.securityContext?.seccompProfile?.type).to.equal("RuntimeDefault");
          expect(container.securityContext).to.deep.include({
            readOnlyRootFilesystem: true,
            allowPrivilegeEscalation: false,
          });
          expect(container.securityContext?.capabilities?.drop).to.deep.equal(["ALL"]);
          expect(pod.automountServiceAccountToken).to.equal(false);
          const budget = find<{ spec: { maxUnavailable?: number; selector: { matchLabels: Record<string, string> } } }>(
            "PodDisruptionBudget",
            "envoy",
          );
          expect(budget?.spec.maxUnavailable).to.equal(1);
          const autoscaler = find<{
            spec: { minReplicas: number; maxReplicas: number; scaleTargetRef: { name: string } };
          }>("HorizontalPodAutoscaler", "envoy");
          expect(autoscaler?.spec.scaleTargetRef.name).to.equal("envoy");
          if (overlayName === "production")
            expect(autoscaler!.spec.minReplicas, "two Envoy pods at least").to.be.at.least(2);
        });

        it("runs this directory's envoy.yaml and SDS file, byte for byte, from a generated ConfigMap", () => {
          const args: string[] = container.args ?? [];
          const configPath = args[args.indexOf("--config-path") + 1]!;
          const volume = pod.volumes.find((v: any) => v.configMap);
          const mount = mountOf(volume.name);
          expect(posix.dirname(configPath), "--config-path is in the ConfigMap's mount").to.equal(mount.mountPath);
          const configMap = find<{ data: Record<string, string> }>("ConfigMap", volume.configMap.name);
          expect(configMap, `ConfigMap ${volume.configMap.name}`).to.not.equal(undefined);
          expect(configMap!.metadata.name, "named with a hash of its content: a change rolls the pods").to.match(
            /^envoy-config-[a-z0-9]{10}$/,
          );
          expect(configMap!.data[posix.basename(configPath)], "the ConfigMap holds deploy/envoy/envoy.yaml").to.equal(
            readFileSync(ENVOY_YAML, "utf8"),
          );
          const sdsPath = chain.transport_socket.typed_config.common_tls_context.tls_certificate_sds_secret_configs[0]
            .sds_config.path_config_source.path as string;
          expect(posix.dirname(sdsPath), "the SDS file is in the same mount").to.equal(mount.mountPath);
          expect(configMap!.data[posix.basename(sdsPath)]).to.equal(
            readFileSync(join(ENVOY_DIR, posix.basename(sdsPath)), "utf8"),
          );
        });

        it("mounts the certificate Secret where the SDS file watches", () => {
          const response = parseYaml(readFileSync(join(ENVOY_DIR, "edge-certificate.yaml"), "utf8"));
          const watched = response.resources[0].tls_certificate.watched_directory.path;
          const volume = pod.volumes.find((v: any) => v.secret);
          expect(volume?.secret?.secretName).to.equal("envoy-tls");
          expect(mountOf(volume.name)?.mountPath).to.equal(watched);
          expect(mountOf(volume.name)?.readOnly).to.equal(true);
          // Readable by Envoy's group only.
          expect(volume.secret.defaultMode).to.equal(0o440);
          expect(pod.securityContext?.fsGroup).to.equal(pod.securityContext?.runAsGroup);
        });

        it("serves TLS on the container port the way in targets: a LoadBalancer that keeps the client's address, selecting Envoy alone", () => {
          const entries = objects.filter(
            (o) => (o.kind === "Service" && (o as any).spec?.type === "LoadBalancer") || o.kind === "Ingress",
          ) as any[];
          expect(
            entries.map((e) => `${e.kind}/${e.metadata.name}`),
            "one way in",
          ).to.deep.equal(["Service/envoy"]);
          const entry = entries[0];
          expect(
            Object.entries(entry.spec.selector).every(([k, v]) => deployment.spec.template.metadata.labels[k] === v),
            "it selects the Envoy pods",
          ).to.equal(true);
          for (const other of objects.filter((o) => o.kind === "Deployment" && o !== deployment) as any[]) {
            expect(
              Object.entries(entry.spec.selector).every(([k, v]) => other.spec.template.metadata.labels[k] === v),
              `and not ${other.metadata.name}`,
            ).to.equal(false);
          }
          // Local: no node rewrites the source, so Envoy's peer is the client, the address it appends to
          // X-Forwarded-For: one trusted hop at the gateway.
          expect(entry.spec.externalTrafficPolicy).to.equal("Local");
          expect(hcm?.use_remote_address).to.equal(true);
          const gateway = objects.find((o) => o.kind === "Deployment" && o.metadata.name === "gateway") as any;
          const hops = gateway.spec.template.spec.containers[0].env.find(
            (e: EnvVar) => e.name === gatewaySettings.trustedProxyHops.env,
          )?.value;
          expect(hops, gatewaySettings.trustedProxyHops.env).to.equal("1");
          expect(entry.spec.ports).to.have.length(1);
          const target = portOf(entry.spec.ports[0].targetPort);
          expect(target, "the Service targets the TLS listener").to.equal(https.address.socket_address.port_value);
        });

        it("is probed on a listener of its own, never the loopback admin API; scraped on its metrics listener; drained before it exits", () => {
          const admin = envoy.admin.address.socket_address;
          expect(admin.address, "the admin API is loopback only").to.equal("127.0.0.1");
          for (const [what, probe] of Object.entries({
            startup: container.startupProbe,
            readiness: container.readinessProbe,
            liveness: container.livenessProbe,
          })) {
            const port = portOf(probe?.httpGet?.port ?? probe?.tcpSocket?.port);
            expect(port, `${what} probe`).to.be.a("number");
            expect(port, `${what}: not the admin port`).to.not.equal(admin.port_value);
            const listener = listenerOn(port);
            expect(listener?.address?.socket_address?.address, `${what}: a listener on every interface`).to.equal(
              "0.0.0.0",
            );
            if (probe.httpGet) {
              const route = routesOf(listener).find((r) => r?.match?.path === probe.httpGet.path);
              expect(route?.direct_response?.status, `${what}: ${probe.httpGet.path} answers 200`).to.equal(200);
            }
          }
          expect(listenerOn(portOf(container.readinessProbe.httpGet.port))?.drain_type, "probes do not drain").to.equal(
            "MODIFY_ONLY",
          );
          // Metrics: the annotation's port and path reach the admin API's /stats/prometheus, and nothing else of it.
          const annotations = deployment.spec.template.metadata.annotations ?? {};
          const metrics = listenerOn(Number(annotations["prometheus.io/port"]));
          const served = routesOf(metrics).filter((r) => r?.route);
          expect(
            served.map((r) => [r.match.path, r.route.prefix_rewrite]),
            "only the statistics",
          ).to.deep.equal([[annotations["prometheus.io/path"], "/stats/prometheus"]]);
          const adminCluster = clusterNamed(served[0].route.cluster)?.load_assignment?.endpoints?.[0]?.lb_endpoints?.[0]
            ?.endpoint?.address?.socket_address;
          expect(adminCluster).to.deep.equal({ address: admin.address, port_value: admin.port_value });
          // The drain: preStop fails Envoy's health check on the admin port (every listener then drains),
          // waits, and the grace period covers it.
          const preStop: string[] = container.lifecycle?.preStop?.exec?.command ?? [];
          const script = preStop.join(" ");
          expect(script).to.include(`/dev/tcp/127.0.0.1/${admin.port_value}`).and.to.include("POST /healthcheck/fail");
          const sleep = Number(/sleep (\d+)/.exec(script)?.[1]);
          expect(sleep, "preStop waits").to.be.greaterThan(0);
          expect(pod.terminationGracePeriodSeconds).to.be.greaterThan(sleep);
          expect(https.drain_type ?? "DEFAULT", "the public listener drains").to.equal("DEFAULT");
        });
      });
    }
  });
});
