// Observability through the real multi-process mesh, with tracing on (OTLP/HTTP to a receiver in this
// process) and every service's metrics port handed over by the launcher:
// - traces: one order payment is one trace across gateway, orders and payments, with correct parent
//   links (gateway request → gateway client call → orders server call → orders client call → payments
//   server call → its statements); a client's own traceparent starts no trace (no trusted proxy here);
//   statement spans carry the SQL text, never parameter values;
// - request ids: generated (a client's own is not trusted), returned, and on the log lines of every hop;
//   one access-log line per request with route template, status, duration, bytes, request and trace id;
// - metrics: /metrics on the gateway (no quota drawn) and on each service's metrics port, with bounded
//   labels; every metric the Grafana dashboard and the alert rules in deploy/observability name exists;
// - no token, password, private key or database URL in any log line of any process.
import { expect } from "chai";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parse as parseYaml } from "yaml";
import { ALICE, BOB, DEMO_PASSWORD, newKey, startE2eMesh, type E2eMesh } from "../support/http.js";
import { NODE_FLAGS, type ServiceName } from "../../scripts/mesh.js";

const ROOT = new URL("../..", import.meta.url).pathname;

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: { key: string; value: Record<string, unknown> }[];
}
interface Span extends Omit<OtlpSpan, "attributes"> {
  service: string;
  attributes: Record<string, unknown>;
}
const SERVER = 2;
const CLIENT = 3;

/** OTLP/JSON ids are hex; accept base64 too. */
function hexId(id: string | undefined): string | undefined {
  if (!id) return undefined;
  return /^[0-9a-f]+$/i.test(id) && (id.length === 32 || id.length === 16)
    ? id.toLowerCase()
    : Buffer.from(id, "base64").toString("hex");
}
function attributeValue(v: Record<string, unknown>): unknown {
  return v.stringValue ?? v.intValue ?? v.boolValue ?? v.doubleValue;
}

/** Whether a trace holds a server span of a service, named as given. */
function hasServerSpan(trace: Span[], service: string, name: RegExp): boolean {
  return trace.some((s) => s.service === service && s.kind === SERVER && name.test(s.name));
}

/** An OTLP/HTTP (JSON) trace receiver: POST /v1/traces. */
async function startReceiver(): Promise<{ server: Server; port: number; spans: Span[] }> {
  const spans: Span[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.url === "/v1/traces") {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
          resourceSpans: { resource: { attributes: OtlpSpan["attributes"] }; scopeSpans: { spans: OtlpSpan[] }[] }[];
        };
        for (const rs of body.resourceSpans) {
          const service = String(
            attributeValue(rs.resource.attributes?.find((a) => a.key === "service.name")?.value ?? {}),
          );
          for (const ss of rs.scopeSpans) {
            for (const s of ss.spans) {
              spans.push({
                ...s,
                traceId: hexId(s.traceId)!,
                spanId: hexId(s.spanId)!,
                ...(hexId(s.parentSpanId) ? { parentSpanId: hexId(s.parentSpanId)! } : {}),
                service,
                attributes: Object.fromEntries((s.attributes ?? []).map((a) => [a.key, attributeValue(a.value)])),
              });
            }
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  return { server, port: (server.address() as AddressInfo).port, spans };
}

/** Metric names a scrape declares (# TYPE lines), with their types. */
function declared(scrape: string): Map<string, string> {
  return new Map([...scrape.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
}

/** The value of the sample `name` whose labels include `labels` (any order), or undefined. */
function sample(scrape: string, name: string, labels: Record<string, string>): number | undefined {
  for (const m of scrape.matchAll(/^(\w+)(?:\{(.*)\})? (\S+)$/gm)) {
    if (m[1] !== name) continue;
    const have = Object.fromEntries(
      [...(m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1]!, l[2]!]),
    );
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3]);
  }
  return undefined;
}

/** The metric names a PromQL text mentions, reduced to the declared family (_bucket/_sum/_count of a histogram). */
function metricNamesIn(text: string): string[] {
  return [...new Set([...text.matchAll(/\b((?:switchyard|nodejs|process)_[a-z0-9_]+)\b/g)].map((m) => m[1]!))];
}

describe("observability (real mesh, tracing on)", function () {
  this.timeout(120_000);
  let e2e: E2eMesh;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  const tokens: string[] = [];

  before(async () => {
    receiver = await startReceiver();
    e2e = await startE2eMesh("observability", {
      metrics: true,
      // A second gateway, as behind Envoy (one trusted proxy hop): it continues the proxy's trace and keeps its request id.
      replicas: { gateway: 2 },
      envForReplica: { gateway: [{}, { GATEWAY_TRUSTED_PROXY_HOPS: "1" }] },
      env: {
        LOG_LEVEL: "debug",
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${receiver.port}`,
        OTEL_BSP_SCHEDULE_DELAY: "100",
      },
    });
  });
  after(async () => {
    await e2e?.stop();
    receiver?.server.close();
  });

  const metricsOf = async (name: ServiceName) => {
    const port = e2e.mesh.metricsPorts[name][0]!;
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(res.status, `${name} /metrics`).to.equal(200);
    return res.text();
  };

  async function payAnOrder(headers: Record<string, string> = {}) {
    const alice = await e2e.api.login(ALICE);
    tokens.push(alice);
    const created = await e2e.api.post("/v1/orders", {
      token: alice,
      json: { currency: "EUR", items: [{ sku: "BOOK-1", quantity: 1 }] },
    });
    expect(created.status, created.text).to.equal(201);
    const paid = await e2e.api.post(`/v1/orders/${created.json.id}/payment`, {
      token: alice,
      json: { source: "tok_visa" },
      headers,
    });
    expect(paid.status, paid.text).to.equal(201);
    return paid;
  }

  it("one order payment is one trace across gateway, orders and payments, with correct parent links", async () => {
    const foreignTrace = randomBytes(16).toString("hex");
    const paid = await payAnOrder({ traceparent: `00-${foreignTrace}-${randomBytes(8).toString("hex")}-01` });
    const requestId = paid.headers.get("x-request-id")!;

    let trace: Span[] = [];
    const until = Date.now() + 15_000;
    while (Date.now() < until) {
      const root = receiver.spans.find(
        (s) => s.service === "gateway" && s.kind === SERVER && s.attributes["switchyard.request_id"] === requestId,
      );
      trace = root ? receiver.spans.filter((s) => s.traceId === root.traceId) : [];
      // Each process exports on its own schedule: wait for every hop's server span, not just one.
      if (
        hasServerSpan(trace, "orders", /OrderService\/PayOrder$/) &&
        hasServerSpan(trace, "payments", /PaymentService\/CreatePayment$/)
      )
        break;
      await sleep(100);
    }
    const byId = new Map(trace.map((s) => [s.spanId, s]));
    const find = (service: string, kind: number, name: RegExp) => {
      const span = trace.find((s) => s.service === service && s.kind === kind && name.test(s.name));
      expect(
        span,
        `${service} ${kind === SERVER ? "server" : "client"} span ${name} in ${trace.map((s) => `${s.service}:${s.name}`).join(", ")}`,
      ).to.not.equal(undefined);
      return span!;
    };
    const root = find("gateway", SERVER, /^POST \/v1\/orders\/\{order_id\}\/payment$/);
    expect(root.traceId, "a client's own traceparent is not trusted (no trusted proxy)").to.not.equal(foreignTrace);
    expect(root.parentSpanId, "the edge span is the root").to.equal(undefined);
    expect(root.attributes["http.route"]).to.equal("/v1/orders/{order_id}/payment");

    const gatewayCall = find("gateway", CLIENT, /OrderService\/PayOrder$/);
    const ordersServer = find("orders", SERVER, /OrderService\/PayOrder$/);
    const ordersCall = find("orders", CLIENT, /PaymentService\/CreatePayment$/);
    const paymentsServer = find("payments", SERVER, /PaymentService\/CreatePayment$/);
    expect(gatewayCall.parentSpanId).to.equal(root.spanId);
    expect(ordersServer.parentSpanId).to.equal(gatewayCall.spanId);
    expect(ordersCall.parentSpanId).to.equal(ordersServer.spanId);
    expect(paymentsServer.parentSpanId).to.equal(ordersCall.spanId);

    // One root, every other span's parent in the same trace.
    expect(trace.filter((s) => !s.parentSpanId)).to.have.length(1);
    for (const s of trace)
      if (s.parentSpanId)
        expect(byId.has(s.parentSpanId), `${s.service}:${s.name}'s parent is in the trace`).to.equal(true);

    // Statements of both services, as children within their service, with their text and no values.
    for (const [service, server] of [
      ["orders", ordersServer],
      ["payments", paymentsServer],
    ] as const) {
      const statements = trace.filter((s) => s.service === service && s.attributes["db.system.name"] === "postgresql");
      expect(statements.length, `${service} statement spans`).to.be.greaterThan(0);
      for (const st of statements) {
        let up = st.parentSpanId ? byId.get(st.parentSpanId) : undefined;
        while (up && up !== server && up.service === service)
          up = up.parentSpanId ? byId.get(up.parentSpanId) : undefined;
        expect(up, `${service} statement ${st.name} descends from its server span`).to.equal(server);
      }
    }
    expect(JSON.stringify(trace), "no parameter values or credentials in spans").to.not.match(
      /tok_visa|demo-password|Bearer /,
    );
  });

  it("behind a trusted proxy hop, the proxy's traceparent continues its trace and its x-request-id is kept, on every hop", async () => {
    const proxied = `http://127.0.0.1:${e2e.mesh.replicaPorts.gateway[1]}`;
    const alice = await e2e.api.login(ALICE);
    const traceId = randomBytes(16).toString("hex");
    const parentSpanId = randomBytes(8).toString("hex");
    const requestId = `envoy-${randomBytes(6).toString("hex")}`;
    // What Envoy sends: the client's address appended to X-Forwarded-For, its own request id and trace context.
    const headers = {
      authorization: `Bearer ${alice}`,
      "content-type": "application/json",
      "x-forwarded-for": "203.0.113.7",
      "x-request-id": requestId,
      traceparent: `00-${traceId}-${parentSpanId}-01`,
    };
    const created = await fetch(`${proxied}/v1/orders`, {
      method: "POST",
      headers,
      body: JSON.stringify({ currency: "EUR", items: [{ sku: "BOOK-1", quantity: 1 }] }),
    });
    expect(created.status, await created.clone().text()).to.equal(201);
    expect(created.headers.get("x-request-id"), "the proxy's request id is the request's").to.equal(requestId);

    let trace: Span[] = [];
    const until = Date.now() + 15_000;
    while (Date.now() < until) {
      trace = receiver.spans.filter((s) => s.traceId === traceId);
      // The gateway's span ends last and its process exports apart from orders': wait for both.
      if (hasServerSpan(trace, "gateway", /^POST /) && hasServerSpan(trace, "orders", /OrderService\/CreateOrder$/))
        break;
      await sleep(100);
    }
    const root = trace.find((s) => s.service === "gateway" && s.kind === SERVER);
    expect(
      root,
      `the gateway's span in the proxy's trace: ${trace.map((s) => `${s.service}:${s.name}`).join(", ")}`,
    ).to.not.equal(undefined);
    expect(root!.parentSpanId, "a child of the proxy's span").to.equal(parentSpanId);
    expect(root!.attributes["switchyard.request_id"]).to.equal(requestId);
    const ordersServer = trace.find(
      (s) => s.service === "orders" && s.kind === SERVER && /OrderService\/CreateOrder$/.test(s.name),
    );
    expect(ordersServer, "orders' server span joined the same trace").to.not.equal(undefined);

    await sleep(300);
    const access = e2e.mesh
      .logsOf("gateway", 1)
      .join("")
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === "request" && l.request_id === requestId);
    expect(access, "one access-log line with the proxy's request id").to.have.length(1);
    expect(access[0]!.trace_id).to.equal(traceId);
    const ordersLines = e2e.mesh
      .logsOf("orders")
      .join("")
      .split("\n")
      .filter((l) => l.includes(requestId));
    expect(ordersLines.length, "orders logged under the proxy's request id").to.be.greaterThan(0);
  });

  it("every answer carries its own request id: fixed paths, the API reference, /rpc, refusals and answers of the API", async () => {
    const gateway = e2e.mesh.gatewayUrl;
    const alice = await e2e.api.login(ALICE);
    tokens.push(alice);
    const asks: [string, string, RequestInit?][] = [
      ["/healthz", "healthz"],
      ["/readyz", "readyz"],
      ["/versions", "versions"],
      ["/metrics", "metrics"],
      ["/docs/", "the API reference"],
      [
        "/rpc/switchyard.nope.v1.Nope/Call",
        "/rpc, unknown method",
        { method: "POST", headers: { "content-type": "application/json" }, body: "{}" },
      ],
      ["/v1/no-such-route", "404"],
      ["/v1/payments/pay_0000000000000000", "401"],
      [
        "/v1/tenants/acme/users?limit=1",
        "200 of a deprecated route",
        { headers: { authorization: `Bearer ${alice}` } },
      ],
    ];
    const ids = new Set<string>();
    for (const [path, what, init] of asks) {
      const res = await fetch(`${gateway}${path}`, init);
      await res.arrayBuffer();
      const id = res.headers.get("x-request-id");
      expect(id, `${what} (${res.status})`).to.match(/^[0-9a-f-]{36}$/);
      ids.add(id!);
    }
    expect(ids.size, "one id per request").to.equal(asks.length);
  });

  it("request ids: generated unless from a trusted proxy, returned, passed on and on every hop's log lines; one access-log line per request", async () => {
    const paid = await payAnOrder({ "x-request-id": "client-chosen-id" });
    const requestId = paid.headers.get("x-request-id")!;
    expect(requestId, "a client's own x-request-id is not trusted (no trusted proxy)").to.match(/^[0-9a-f-]{36}$/);
    await sleep(300);
    const linesOf = (name: ServiceName) =>
      e2e.mesh
        .logsOf(name)
        .join("")
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    const access = linesOf("gateway").filter((l) => l.msg === "request" && l.request_id === requestId);
    expect(access, "one access-log line").to.have.length(1);
    expect(access[0]).to.include({ method: "POST", route: "/v1/orders/{order_id}/payment", status: 201 });
    expect(access[0]!.ms).to.be.a("number");
    expect(access[0]!.bytes).to.be.a("number").greaterThan(0);
    expect(access[0]!.trace_id).to.match(/^[0-9a-f]{32}$/);
    for (const name of ["orders", "payments"] as const) {
      const mine = linesOf(name).filter((l) => l.request_id === requestId);
      expect(mine.length, `${name} logged lines with the request id`).to.be.greaterThan(0);
      expect(
        mine.every((l) => l.trace_id === access[0]!.trace_id),
        `${name}'s lines carry the trace id`,
      ).to.equal(true);
    }
    // Every line a service writes within a call carries a request id.
    for (const name of ["identity", "payments", "orders", "content"] as const) {
      const calls = linesOf(name).filter((l) => l.rpc !== undefined);
      expect(calls.length, `${name} logged calls`).to.be.greaterThan(0);
      for (const l of calls) expect(l.request_id, `${name}: ${JSON.stringify(l)}`).to.be.a("string");
    }
  });

  it("metrics: /metrics on the gateway (outside /v1, no quota) and on every service's metrics port, with bounded labels", async () => {
    await payAnOrder();
    const alice = await e2e.api.login(ALICE);
    tokens.push(alice);
    // A replay, a deprecated route, a read.
    const key = newKey();
    for (let i = 0; i < 2; i++) {
      const res = await e2e.api.post("/v1/payments", {
        token: alice,
        key,
        json: { amount: 700, currency: "EUR", source: "tok_visa" },
      });
      expect(res.status).to.be.oneOf([200, 201]);
    }
    expect((await e2e.api.get("/v1/tenants/acme/users?limit=1", { token: alice })).status).to.equal(200);

    const res = await fetch(`${e2e.mesh.gatewayUrl}/metrics`);
    expect(res.status).to.equal(200);
    expect(res.headers.get("x-ratelimit-limit"), "no quota drawn").to.equal(null);
    const gateway = await res.text();
    const atLeastOne = (value: number | undefined, what: string) =>
      expect(value, what).to.be.a("number").and.greaterThan(0);
    atLeastOne(
      sample(gateway, "switchyard_http_request_duration_seconds_count", {
        service: "gateway",
        method: "POST",
        route: "/v1/orders/{order_id}/payment",
        status_class: "2xx",
      }),
      "edge requests by route template",
    );
    expect(sample(gateway, "switchyard_gateway_concurrency_limit", { service: "gateway" })).to.equal(10_000);
    expect(sample(gateway, "switchyard_gateway_inflight_requests", {})).to.be.a("number");
    expect(sample(gateway, "switchyard_gateway_live_streams", {})).to.equal(0);
    atLeastOne(
      sample(gateway, "switchyard_gateway_deprecated_requests_total", {
        tenant: "acme",
        route: "GET /v1/tenants/{tenant_id}/users",
      }),
      "deprecated route use per tenant",
    );
    atLeastOne(
      sample(gateway, "switchyard_rpc_client_duration_seconds_count", {
        rpc_service: "switchyard.orders.v1.OrderService",
        rpc_method: "PayOrder",
        grpc_code: "OK",
      }),
      "gateway's client calls",
    );
    const orders = await metricsOf("orders");
    atLeastOne(
      sample(orders, "switchyard_rpc_server_duration_seconds_count", {
        service: "orders",
        rpc_service: "switchyard.orders.v1.OrderService",
        rpc_method: "PayOrder",
        grpc_code: "OK",
      }),
      "orders' server calls",
    );
    atLeastOne(
      sample(orders, "switchyard_rpc_client_duration_seconds_count", {
        rpc_service: "switchyard.payments.v1.PaymentService",
        rpc_method: "CreatePayment",
        grpc_code: "OK",
      }),
      "orders' calls to payments",
    );
    const payments = await metricsOf("payments");
    atLeastOne(sample(payments, "switchyard_idempotent_replays_total", { service: "payments" }), "idempotent replays");
    atLeastOne(
      sample(payments, "switchyard_db_statement_duration_seconds_count", { operation: "INSERT", outcome: "ok" }),
      "statements",
    );
    expect(sample(payments, "switchyard_db_pool_connections_in_use", { service: "payments" })).to.be.a("number");
    expect(sample(payments, "switchyard_db_pool_waiting", {})).to.be.a("number");
    // Payments serves no streaming method (reflection is off): no series, or only zeros.
    expect(
      [...payments.matchAll(/^switchyard_rpc_server_open_streams\{.*\} (\S+)$/gm)]
        .map((m) => Number(m[1]))
        .filter((n) => n !== 0),
      "payments follows no stream but serves none",
    ).to.deep.equal([]);
    expect(sample(payments, "switchyard_event_loop_delay_p99_seconds", {})).to.be.a("number");
    const content = await metricsOf("content");
    const identity = await metricsOf("identity");
    // Identity serves the revocation watch every process follows: open streams.
    atLeastOne(
      sample(identity, "switchyard_rpc_server_open_streams", { rpc_method: "WatchRevocations" }),
      "identity's open streams",
    );
    // Bounded labels: templates, never a raw path or an id.
    for (const scrape of [gateway, orders, payments, content, identity]) {
      for (const [, labels] of scrape.matchAll(/^\w+\{([^}]*)\}/gm)) {
        expect(labels, "no raw id in a label").to.not.match(/="[^"]*(\/\d+|pay_|ord_|[0-9a-f]{8}-[0-9a-f]{4})/);
      }
    }
  });

  it("every metric the Grafana dashboard and the alert rules name exists in a live scrape", async () => {
    const scrapes = [
      await (await fetch(`${e2e.mesh.gatewayUrl}/metrics`)).text(),
      ...(await Promise.all((["identity", "payments", "orders", "content", "webhooks"] as const).map(metricsOf))),
    ];
    const families = new Map<string, string>();
    for (const s of scrapes) for (const [n, t] of declared(s)) families.set(n, t);
    const exists = (name: string) => {
      if (families.has(name)) return true;
      const base = name.replace(/_(bucket|sum|count)$/, "");
      return (
        families.get(base) === "histogram" ||
        (name.endsWith("_sum") || name.endsWith("_count") ? families.get(base) === "summary" : false)
      );
    };
    const dashboard = JSON.parse(
      readFileSync(join(ROOT, "deploy/observability/switchyard-dashboard.json"), "utf8"),
    ) as { panels: { targets?: { expr: string }[] }[] };
    const dashboardExprs = dashboard.panels.flatMap((p) => p.targets ?? []).map((t) => t.expr);
    const rules = parseYaml(readFileSync(join(ROOT, "deploy/observability/switchyard-alerts.yaml"), "utf8")) as {
      groups: { rules: { alert: string; expr: string; for?: string; labels?: { severity?: string } }[] }[];
    };
    const ruleList = rules.groups.flatMap((g) => g.rules);
    expect(ruleList.map((r) => r.alert)).to.include.members([
      "SwitchyardHighErrorRatio",
      "SwitchyardHighP99Latency",
      "SwitchyardShedding",
      "SwitchyardEventLoopDelay",
    ]);
    for (const r of ruleList) expect(r.labels?.severity, `${r.alert} has a severity`).to.be.a("string");
    const named = metricNamesIn([...dashboardExprs, ...ruleList.map((r) => r.expr)].join("\n"));
    expect(named.length).to.be.greaterThan(15);
    expect(
      named.filter((n) => !exists(n)),
      "named but not scraped",
    ).to.deep.equal([]);
  });

  it("no token, password, private key or database URL in any log line of any process", async () => {
    // A failed login with a made-up password, a member's login, a call with a bad token.
    const wrong = `wrong-${randomBytes(6).toString("hex")}`;
    expect(
      (await e2e.api.post(`/v1/tenants/${BOB.tenant}/sessions`, { json: { email: BOB.email, password: wrong } }))
        .status,
    ).to.equal(401);
    tokens.push(await e2e.api.login(BOB));
    expect((await e2e.api.get("/v1/orders/1", { token: `${tokens[0]!.slice(0, -4)}AAAA` })).status).to.equal(401);
    await sleep(300);
    const logs = e2e.mesh.logs.join("");
    expect(logs.length).to.be.greaterThan(1_000);
    for (const token of tokens) expect(logs.includes(token), "an access token").to.equal(false);
    for (const token of tokens) expect(logs.includes(token.split(".")[2]!), "a token's signature").to.equal(false);
    expect(logs).to.not.include(DEMO_PASSWORD);
    expect(logs).to.not.include(wrong);
    expect(logs).to.not.match(/PRIVATE KEY|"d":"[A-Za-z0-9_-]{20,}"/);
    expect(logs).to.not.match(/postgres(ql)?:\/\//);

    // A service given a database URL it cannot reach says so without the URL (or its password).
    const password = `pw-${randomBytes(8).toString("hex")}`;
    const out = await new Promise<string>((resolve) => {
      const child = spawn(process.execPath, [...NODE_FLAGS, join(ROOT, "dist/payments.js")], {
        env: {
          ...process.env,
          LOG_LEVEL: "debug",
          PAYMENTS_PORT: "0",
          PAYMENTS_METRICS_PORT: "0",
          DATABASE_URL: `postgres://switchyard:${password}@127.0.0.1:1/switchyard`,
        },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let text = "";
      child.stdout.on("data", (d: Buffer) => (text += d.toString()));
      child.stderr.on("data", (d: Buffer) => (text += d.toString()));
      const killer = setTimeout(() => child.kill("SIGKILL"), 30_000);
      child.on("exit", () => {
        clearTimeout(killer);
        resolve(text);
      });
    });
    expect(out, "it did say why it stopped").to.not.equal("");
    expect(out).to.not.include(password);
    expect(out).to.not.match(/postgres(ql)?:\/\//);
  });
});
