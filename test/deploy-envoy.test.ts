// deploy/envoy/envoy.yaml, without an Envoy binary: read strictly as envoy.config.bootstrap.v3.Bootstrap
// against Envoy's own API protos (built with buf from the copy inside @grpc/grpc-js-xds, see
// test/support/envoy-api.ts), so a misspelt field, a value of the wrong type or an unknown typed_config
// fails as `envoy --mode validate` would fail it; then held to the gateway: every route's timeout against
// the gateway's deadline, the live feed's route (found from the OpenAPI document) with no timeout but an
// idle timeout above the gateway's heartbeat, the trusted X-Forwarded-For hops, the upstream's name and
// port, and Envoy's own error bodies against the error catalogue.
import { expect } from "chai";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { gatewaySettings } from "@switchyard/gateway";
import { isErrorReason } from "@switchyard/platform/errors.js";
import { HTTP_STATUS } from "@switchyard/gateway/runtime/errors.js";
import { DOCS_PATH, REDOC_ASSET, docsPathOf } from "@switchyard/gateway/docs.js";
import { publishedVersions } from "@switchyard/gateway/runtime/versions.js";
import { envoyApi } from "./support/envoy-api.js";
import { render, type K8sObject } from "./support/kustomize.js";

const ROOT = new URL("..", import.meta.url).pathname;
const ENVOY_YAML = join(ROOT, "deploy", "envoy", "envoy.yaml");

/** Envoy reads YAML by converting it to JSON and parsing that as the proto's JSON form. */
function parseBootstrap(config: unknown) {
  const api = envoyApi();
  const bootstrap = api.registry.getMessage("envoy.config.bootstrap.v3.Bootstrap");
  if (!bootstrap) throw new Error("envoy.config.bootstrap.v3.Bootstrap is not in the registry");
  return fromJson(bootstrap, config as JsonValue, { registry: api.registry });
}

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
const gatewayDeployment = production.find((o) => o.kind === "Deployment" && o.metadata.name === "gateway") as K8sObject & {
  spec: { template: { spec: { containers: { env?: EnvVar[]; ports?: { containerPort: number }[] }[] } } };
};
const gatewayService = production.find((o) => o.kind === "Service" && o.metadata.name === "gateway") as K8sObject & { spec: { ports: { port: number }[] } };
const gatewayEnv = new Map((gatewayDeployment?.spec.template.spec.containers[0]?.env ?? []).map((e) => [e.name, e.value]));
/** A gateway setting as deployed: the manifest's value, else the code's default. */
function deployed(setting: { env: string; fallback?: number }): number {
  const value = gatewayEnv.get(setting.env);
  return value !== undefined ? Number(value) : setting.fallback!;
}

// ---- the config, navigated loosely (after the strict parse has vouched for its shape) ---------------

const envoy = parseYaml(readFileSync(ENVOY_YAML, "utf8")) as any;
const listeners = (envoy?.static_resources?.listeners ?? []) as any[];
const clusters = (envoy?.static_resources?.clusters ?? []) as any[];
const https = listeners.find((l) => l?.address?.socket_address?.port_value === 8443);
const chain = https?.filter_chains?.[0];
const hcm = chain?.filters?.find((f: any) => f?.name === "envoy.filters.network.http_connection_manager")?.typed_config;
const routes = (hcm?.route_config?.virtual_hosts ?? []).flatMap((vh: any) => vh?.routes ?? []) as any[];

/** The route Envoy picks for a request: the first whose path and header matchers all match. */
function routeFor(method: string, path: string, headers: Record<string, string>): any {
  const all: Record<string, string> = { ":method": method, ":path": path, ...Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])) };
  const stringMatches = (m: any, value: string | undefined): boolean => {
    if (value === undefined) return false;
    const [v, ignore] = [m.ignore_case ? value.toLowerCase() : value, (s: string) => (m.ignore_case ? s.toLowerCase() : s)];
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
      match.prefix !== undefined ? p.startsWith(match.prefix) :
      match.path !== undefined ? p === match.path :
      match.path_separated_prefix !== undefined ? p === match.path_separated_prefix || p.startsWith(`${match.path_separated_prefix}/`) :
      match.safe_regex !== undefined ? new RegExp(`^(?:${match.safe_regex.regex})$`).test(p) :
      (() => { throw new Error(`route match ${JSON.stringify(match)} not understood by the test`); })();
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
    const openapi = parseYaml(readFileSync(join(OPENAPI_DIR, file), "utf8")) as any;
    const resolveRef = (node: any): any => (node?.$ref ? resolveRef(String(node.$ref).replace(/^#\//, "").split("/").reduce((n: any, k: string) => n?.[k], openapi)) : node);
    return Object.entries(openapi.paths ?? {}).flatMap(([path, item]: [string, any]) =>
      ["get", "put", "post", "patch", "delete"].filter((m) => item?.[m]).map((m) => ({
        method: m.toUpperCase(),
        // A concrete request path: every template parameter filled in.
        path: path.replace(/\{[^}]+\}/g, "abc123"),
        stream: Object.values(item[m].responses ?? {}).some((r) => Boolean(resolveRef(r)?.content?.["text/event-stream"])),
      })),
    );
  });

// ==================================================================================================

describe("deploy/envoy/envoy.yaml", function () {
  this.timeout(60_000);

  describe("as Envoy reads it (envoy.config.bootstrap.v3.Bootstrap, Envoy's own protos)", () => {
    it("parses strictly, every typed_config resolved", () => {
      const api = envoyApi();
      console.log(`      (${api.files} .proto files built with buf from @grpc/grpc-js-xds in ${api.ms} ms; left out, imports not shipped: ${api.leftOut.length})`);
      const bootstrap = parseBootstrap(envoy) as any;
      expect(bootstrap.staticResources.listeners).to.have.length(listeners.length);
      expect(bootstrap.staticResources.clusters).to.have.length(clusters.length);
      // Every Any was resolved to its message (an unknown @type fails the parse).
      const types = JSON.stringify(envoy).match(/type\.googleapis\.com\/[\w.]+/g) ?? [];
      expect(types.length, "the Anys of the listener, connection manager, router and TLS context").to.be.at.least(4);
      for (const t of new Set(types)) expect(api.registry.getMessage(t.split("/")[1]!), t).to.not.equal(undefined);
    });

    const mutations: [string, (c: any) => void, RegExp][] = [
      ["a misspelt field of the connection manager (inside a typed_config)", (c) => {
        const h = c.static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
        h.use_remote_adress = h.use_remote_address;
        delete h.use_remote_address;
      }, /use_remote_adress/],
      ["a misspelt field of a route", (c) => {
        c.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[0].routes[0].route.idle_timout = "60s";
      }, /idle_timout/],
      ["a misspelt field of an HTTP filter's config (an Any inside an Any)", (c) => {
        const router = c.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters.at(-1).typed_config;
        router.suppres_envoy_headers = true;
      }, /suppres_envoy_headers/],
      ["a duration of the wrong type", (c) => {
        c.static_resources.clusters[0].connect_timeout = 1;
      }, /connect_timeout|Duration/],
      ["a port that is not a number", (c) => {
        c.static_resources.listeners[0].address.socket_address.port_value = "https";
      }, /port_value|uint32/],
      ["an enum value that does not exist", (c) => {
        c.static_resources.clusters[0].lb_policy = "ROUND_ROBBIN";
      }, /lb_policy|ROUND_ROBBIN/],
      ["a typed_config of an unknown type", (c) => {
        c.static_resources.listeners[0].filter_chains[0].filters[0].typed_config["@type"] = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManagr";
      }, /HttpConnectionManagr/],
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
      // use_remote_address: Envoy appends the peer it saw; it trusts no hop in front of it.
      expect(hcm?.use_remote_address, "use_remote_address").to.equal(true);
      expect(hcm?.xff_num_trusted_hops ?? 0, "Envoy trusts no hop in front of it").to.equal(0);
      // Proxies that append between the client and the gateway: Envoy alone.
      const appending = hcm?.use_remote_address ? 1 : 0;
      expect(gatewayEnv.get(gatewaySettings.trustedProxyHops.env), gatewaySettings.trustedProxyHops.env).to.equal(String(appending));
    });

    it("sends every route to the gateway Service on the gateway's port", () => {
      expect(gatewayService, "the gateway Service in overlays/production").to.not.equal(undefined);
      const upstreams = new Set(routes.filter((r) => r?.route).map((r) => r.route.cluster));
      expect([...upstreams]).to.deep.equal(["gateway"]);
      const endpoints = (clusters.find((c) => c?.name === "gateway")?.load_assignment?.endpoints ?? []).flatMap((e: any) => (e?.lb_endpoints ?? []).map((l: any) => l?.endpoint?.address?.socket_address));
      expect(endpoints).to.not.be.empty;
      for (const e of endpoints) {
        expect(e.address, "endpoint is the gateway Service").to.equal(gatewayService.metadata.name);
        expect(e.port_value, "endpoint port").to.equal(gatewayService.spec.ports[0]!.port);
        expect(e.port_value, "the gateway's port").to.equal(gatewaySettings.port.fallback);
      }
    });

    it("the OpenAPI document has live streams, and every /v1 operation reaches the gateway", () => {
      expect(operations.filter((op) => op.stream).map((op) => `${op.method} ${op.path}`), "operations offering text/event-stream").to.include("GET /v1/posts");
      for (const op of operations) {
        for (const accept of ["application/json", "text/event-stream"]) {
          const route = routeFor(op.method, `${op.path}?limit=1`, { accept });
          expect(route?.route?.cluster, `${op.method} ${op.path} (${accept})`).to.equal("gateway");
        }
      }
    });

    it("a live stream gets no response timeout but an idle timeout above the gateway's heartbeat", () => {
      const heartbeat = deployed(gatewaySettings.heartbeatMs);
      for (const op of operations.filter((o) => o.stream)) {
        for (const accept of ["text/event-stream", "text/event-stream; charset=utf-8", "application/json;q=0.5, text/event-stream"]) {
          const route = routeFor(op.method, `${op.path}?limit=1`, { accept });
          const what = `${op.method} ${op.path} (Accept: ${accept}) → route ${route?.name}`;
          expect(route?.route?.timeout, `${what}: timeout`).to.equal("0s");
          expect(durationMs(route?.route?.idle_timeout), `${what}: idle_timeout vs GATEWAY_SSE_HEARTBEAT_MS=${heartbeat}`).to.be.greaterThan(2 * heartbeat);
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
          expect(timeout, `${what}: timeout vs ${gatewaySettings.deadlineMs.env}=${deadline}`).to.be.greaterThan(deadline);
        }
      }
    });

    it("sends /rpc/ to the gateway, which speaks gRPC-Web and Connect and answers CORS itself: no grpc_web or cors filter, no response timeout (WatchPosts streams), an idle timeout", () => {
      const filters = ((hcm?.http_filters ?? []) as any[]).map((f) => f?.name);
      expect(filters, "the gateway translates gRPC-Web; a grpc_web filter would hand it plain gRPC").to.not.include("envoy.filters.http.grpc_web");
      expect(filters, "CORS headers come from the gateway (GATEWAY_CORS_ORIGINS), never twice").to.not.include("envoy.filters.http.cors");
      expect(filters.at(-1)).to.equal("envoy.filters.http.router");
      for (const path of ["/rpc/switchyard.content.v1.ContentService/WatchPosts", "/rpc/switchyard.payments.v1.PaymentService/GetPayment"]) {
        const rpc = routeFor("POST", path, {});
        expect(rpc?.name, path).to.equal("rpc");
        expect(rpc.route?.cluster).to.equal("gateway");
        expect(durationMs(rpc.route?.timeout), "no response timeout").to.equal(0);
        expect(durationMs(rpc.route?.idle_timeout), "an idle timeout").to.be.greaterThan(0);
        expect(rpc.typed_per_filter_config, "no per-route CORS policy").to.equal(undefined);
      }
    });

    it("sends the API reference (/docs, every version's page, its assets) to the gateway, and nothing that only begins like it", () => {
      const pages = [DOCS_PATH, `${DOCS_PATH}/`, ...publishedVersions(new Date()).map((v) => docsPathOf(`v${v.major}`)), REDOC_ASSET];
      for (const path of pages) {
        const route = routeFor("GET", path, { accept: "text/html" });
        expect(route?.route?.cluster, `GET ${path} → route ${route?.name}`).to.equal("gateway");
        expect(durationMs(route?.route?.timeout), `GET ${path}: timeout`).to.be.greaterThan(0);
      }
      for (const path of ["/docsx", "/documents"]) expect(routeFor("GET", path, {})?.direct_response?.status, path).to.equal(404);
    });

    it("health-checks the gateway on /healthz", () => {
      const paths = ((clusters.find((c) => c?.name === "gateway")?.health_checks ?? []) as any[]).map((h) => h?.http_health_check?.path);
      expect(paths).to.include("/healthz");
    });

    it("logs every request as JSON on stdout, without credentials", () => {
      const logs = (hcm?.access_log ?? []) as any[];
      const stdout = logs.find((l) => l?.typed_config?.["@type"] === "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog");
      expect(stdout, "a stdout access log").to.not.equal(undefined);
      expect(stdout.typed_config.log_format?.json_format, "JSON format").to.be.an("object").that.is.not.empty;
      expect(JSON.stringify(stdout.typed_config.log_format.json_format).toLowerCase(), "no credentials in the access log").to.not.match(/authorization|cookie/);
    });

    it("answers its own /v1/ errors and unknown paths with catalogue codes and their statuses", () => {
      const mappers = (hcm?.local_reply_config?.mappers ?? []) as any[];
      expect(mappers).to.not.be.empty;
      for (const m of mappers) {
        const code = m?.body_format_override?.json_format?.code;
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
      expect(routeFor("GET", "/admin", {})?.direct_response?.status).to.equal(404);
    });
  });
});
