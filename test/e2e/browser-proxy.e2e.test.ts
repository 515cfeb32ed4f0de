// The browser proxy (/rpc/…) and CORS through the real mesh, driven by connect-node's Connect and
// gRPC-Web transports over HTTP/1.1 (what a browser speaks; the page itself: browser.e2e.test.ts):
// unary and server-streaming calls pass through with the caller's token and deadline, client and
// bidirectional streaming answer `unimplemented` saying why, only allow-listed methods exist, bad
// input is the protocol's own error and never a 5xx; the same quotas as /v1; CORS only for the
// configured origins.
import { expect } from "chai";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { OrderService } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { OperatorService } from "@switchyard/gen/switchyard/identity/v1/operator_pb.js";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { ALICE, BOB, CAROL, newKey, startE2eMesh, unique, type E2eMesh } from "../support/http.js";

const PAGE_ORIGIN = "http://app.switchyard.test:3000";
const RATE_LIMIT = 40;

describe("e2e: the browser proxy (/rpc) and CORS", function () {
  this.timeout(60_000);
  let env: E2eMesh;
  let alice: string;
  let rpc: string;

  before(async function () {
    this.timeout(120_000);
    env = await startE2eMesh("browser-proxy", {
      metrics: true,
      envFor: { gateway: { GATEWAY_CORS_ORIGINS: `${PAGE_ORIGIN},https://other.switchyard.test` } },
    });
    alice = await env.api.login(ALICE);
    rpc = `${env.mesh.gatewayUrl}/rpc`;
  });
  after(async function () {
    this.timeout(60_000);
    await env?.stop();
  });

  const transports: [string, () => Transport][] = [
    ["Connect (JSON)", () => createConnectTransport({ baseUrl: rpc, httpVersion: "1.1", useBinaryFormat: false })],
    ["Connect (binary)", () => createConnectTransport({ baseUrl: rpc, httpVersion: "1.1", useBinaryFormat: true })],
    ["gRPC-Web", () => createGrpcWebTransport({ baseUrl: rpc, httpVersion: "1.1" })],
  ];
  const auth = () => ({ headers: { authorization: `Bearer ${alice}` } });

  async function refusal(call: () => Promise<unknown>): Promise<ConnectError> {
    try {
      await call();
    } catch (err) {
      return ConnectError.from(err);
    }
    throw new Error("the call was not refused");
  }

  for (const [name, transport] of transports) {
    describe(name, () => {
      it("passes a unary call through with the caller's token (CreateDocument, GetDocument), and the service's own refusal without one", async () => {
        const content = createClient(ContentService, transport());
        const title = `rpc ${unique()}`;
        const { document } = await content.createDocument({ title, body: "through the browser proxy" }, auth());
        const read = await content.getDocument({ documentId: document!.id }, auth());
        expect([read.document?.title, read.document?.etag]).to.deep.equal([title, document!.etag]);
        const anonymous = await refusal(() => content.getDocument({ documentId: document!.id }));
        expect(anonymous.code).to.equal(Code.Unauthenticated);
        const otherTenant = await refusal(async () =>
          content.getDocument(
            { documentId: document!.id },
            { headers: { authorization: `Bearer ${await env.api.login(CAROL)}` } },
          ),
        );
        expect(otherTenant.code, "another tenant's document is not found").to.equal(Code.NotFound);
      });

      it("streams WatchPosts: subscribed, then each new post as it is made; when the page aborts, the call upstream is cancelled too", async () => {
        const content = createClient(ContentService, transport());
        const controller = new AbortController();
        const seen: string[] = [];
        const title = `rpc-feed ${unique()}`;
        let subscribed!: () => void;
        const ready = new Promise<void>((r) => (subscribed = r));
        const watching = (async () => {
          try {
            for await (const m of content.watchPosts({}, { ...auth(), signal: controller.signal })) {
              if (m.subscribed) subscribed();
              if (m.post) {
                seen.push(m.post.title);
                controller.abort();
              }
            }
          } catch (err) {
            if (ConnectError.from(err).code !== Code.Canceled) throw err;
          }
        })();
        await ready;
        const made = await env.api.post("/v1/posts", { token: alice, json: { title, body: "to the page" } });
        expect(made.status).to.equal(201);
        await watching;
        expect(seen).to.deep.equal([title]);
        // The page went away: its call upstream is cancelled, and content holds no stream for it.
        const until = Date.now() + 5_000;
        let open = Number.NaN;
        while (Date.now() < until) {
          const scrape = await (await fetch(`http://127.0.0.1:${env.mesh.metricsPorts.content[0]}/metrics`)).text();
          open = Number(
            /^switchyard_rpc_server_open_streams\{[^}]*rpc_method="WatchPosts"[^}]*\} (\S+)$/m.exec(scrape)?.[1],
          );
          if (open === 0) break;
          await new Promise((r) => setTimeout(r, 50));
        }
        expect(open, "content's open WatchPosts streams once the page aborted").to.equal(0);
      });

      it("answers client and bidirectional streaming with unimplemented, saying they are not available through the browser proxy", async () => {
        const orders = createClient(OrderService, transport());
        const bidi = await refusal(async () => {
          for await (const _ of orders.trackOrders((async function* () {})(), auth())) void _;
        });
        expect([Code[bidi.code], bidi.rawMessage]).to.satisfy(
          ([code, message]: [string, string]) =>
            code === "Unimplemented" &&
            /TrackOrders is bidirectional streaming, which is not available through the browser proxy/.test(message),
        );
        const content = createClient(ContentService, transport());
        const client = await refusal(() => content.importItems((async function* () {})(), auth()));
        expect([Code[client.code], client.rawMessage]).to.satisfy(
          ([code, message]: [string, string]) =>
            code === "Unimplemented" &&
            /ImportItems is client streaming, which is not available through the browser proxy/.test(message),
        );
      });

      it("exposes only allow-listed methods: key sets, service tokens and the operator's service are unimplemented", async () => {
        const identity = createClient(IdentityService, transport());
        for (const call of [
          () => identity.getJwks({}),
          () => identity.createServiceToken({}),
          () => createClient(OperatorService, transport()).createTenant({}),
        ]) {
          const refused = await refusal(call);
          expect(refused.code).to.equal(Code.Unimplemented);
        }
      });
    });
  }

  it("passes the caller's deadline on, capped (Connect-Timeout-Ms), and answers a payment read as GET /v1 does", async () => {
    const payments = createClient(PaymentService, createConnectTransport({ baseUrl: rpc, httpVersion: "1.1" }));
    const created = await env.api.post("/v1/payments", {
      token: alice,
      json: { amount: 700, currency: "EUR", source: "tok_visa" },
      headers: { "idempotency-key": newKey() },
    });
    expect(created.status).to.equal(201);
    const { payment } = await payments.getPayment({ paymentId: created.json.id }, { ...auth(), timeoutMs: 600_000 });
    expect([payment?.id, payment?.amount]).to.deep.equal([created.json.id, 700n]);
  });

  it("answers bad input in the protocol's own format, never a 5xx: malformed JSON and binary bodies → invalid_argument, an unknown method → unimplemented, an unknown service → 404", async () => {
    const post = (path: string, body: string | Uint8Array<ArrayBuffer>, type: string) =>
      fetch(`${rpc}/${path}`, {
        method: "POST",
        headers: { "content-type": type, authorization: `Bearer ${alice}`, "connect-protocol-version": "1" },
        body,
      });
    const badJson = await post("switchyard.content.v1.ContentService/GetDocument", "{not json", "application/json");
    const badJsonText = await badJson.text();
    expect([badJson.status, (JSON.parse(badJsonText) as { code: string }).code], badJsonText).to.deep.equal([
      400,
      "invalid_argument",
    ]);
    const badBinary = await post(
      "switchyard.content.v1.ContentService/GetDocument",
      new Uint8Array([0xff, 0xff, 0xff]),
      "application/proto",
    );
    expect([badBinary.status, ((await badBinary.json()) as { code: string }).code]).to.deep.equal([
      400,
      "invalid_argument",
    ]);
    const badGrpcWeb = await post(
      "switchyard.content.v1.ContentService/GetDocument",
      new Uint8Array([0, 0, 0, 0, 9, 1]),
      "application/grpc-web+proto",
    );
    expect(
      [badGrpcWeb.status, badGrpcWeb.headers.get("grpc-status")],
      "gRPC-Web: invalid_argument (3), trailers-only",
    ).to.deep.equal([200, "3"]);
    const notEnveloped = await post(
      "switchyard.content.v1.ContentService/GetDocument",
      new Uint8Array([0, 0, 0]),
      "application/grpc-web+proto",
    );
    expect([notEnveloped.status, notEnveloped.headers.get("grpc-status")]).to.deep.equal([200, "3"]);
    const unknownMethod = await post("switchyard.content.v1.ContentService/DropEverything", "{}", "application/json");
    expect([unknownMethod.status, ((await unknownMethod.json()) as { code: string }).code]).to.deep.equal([
      404,
      "unimplemented",
    ]);
    const unknownService = await post("switchyard.nothing.v1.Nothing/Call", "{}", "application/json");
    expect(unknownService.status).to.equal(404);
  });

  describe("CORS", () => {
    it("answers a preflight from an allowed origin with the methods, request headers and a Max-Age, for /v1 and /rpc", async () => {
      for (const path of ["/v1/posts", "/rpc/switchyard.content.v1.ContentService/WatchPosts"]) {
        const res = await fetch(`${env.mesh.gatewayUrl}${path}`, {
          method: "OPTIONS",
          headers: {
            origin: PAGE_ORIGIN,
            "access-control-request-method": "POST",
            "access-control-request-headers": "authorization, content-type, connect-protocol-version, x-grpc-web",
          },
        });
        expect(res.status, path).to.equal(204);
        expect(res.headers.get("access-control-allow-origin")).to.equal(PAGE_ORIGIN);
        expect(res.headers.get("access-control-allow-methods")).to.include("POST");
        for (const h of [
          "authorization",
          "content-type",
          "connect-protocol-version",
          "x-grpc-web",
          "idempotency-key",
          "last-event-id",
        ])
          expect(res.headers.get("access-control-allow-headers"), h).to.include(h);
        expect(Number(res.headers.get("access-control-max-age"))).to.be.greaterThan(0);
        expect(res.headers.get("vary")).to.include("Origin");
      }
    });

    it("gives an origin not on the list no CORS headers, on a preflight or a request", async () => {
      const preflight = await fetch(`${env.mesh.gatewayUrl}/v1/posts`, {
        method: "OPTIONS",
        headers: { origin: "https://evil.example", "access-control-request-method": "GET" },
      });
      expect(preflight.status).to.equal(204);
      expect([...preflight.headers.keys()].filter((h) => h.startsWith("access-control-"))).to.deep.equal([]);
      const get = await fetch(`${env.mesh.gatewayUrl}/v1/posts`, {
        headers: { origin: "https://evil.example", authorization: `Bearer ${alice}` },
      });
      expect(get.status).to.equal(200);
      expect(get.headers.get("access-control-allow-origin")).to.equal(null);
    });

    it("lets an allowed origin read the headers a client needs: ETag, Location, X-RateLimit-*, Retry-After, Deprecation, Sunset, Link, and the gRPC-Web trailers", async () => {
      const res = await fetch(`${env.mesh.gatewayUrl}/v1/docs`, {
        method: "POST",
        headers: { origin: PAGE_ORIGIN, authorization: `Bearer ${alice}`, "content-type": "application/json" },
        body: JSON.stringify({ title: "cors", body: "x" }),
      });
      expect(res.status).to.equal(201);
      expect(res.headers.get("access-control-allow-origin")).to.equal(PAGE_ORIGIN);
      const exposed = (res.headers.get("access-control-expose-headers") ?? "").split(/,\s*/);
      for (const h of [
        "etag",
        "location",
        "retry-after",
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        "idempotent-replayed",
        "deprecation",
        "sunset",
        "link",
        "grpc-status",
        "grpc-message",
      ])
        expect(exposed, h).to.include(h);
      expect(res.headers.get("vary"))
        .to.match(/Origin/)
        .and.match(/Accept/);
    });
  });

  describe("quotas and shedding, as on /v1", () => {
    let limited: E2eMesh;
    before(async function () {
      this.timeout(120_000);
      limited = await startE2eMesh("browser-proxy-limits", {
        envFor: {
          gateway: {
            GATEWAY_RATE_LIMIT: String(RATE_LIMIT),
            GATEWAY_RATE_WINDOW_SECONDS: "600",
            GATEWAY_MAX_STREAMS_PER_CALLER: "1",
          },
        },
      });
    });
    after(async function () {
      this.timeout(60_000);
      await limited?.stop();
    });

    it(`draws on the caller's quota: past ${RATE_LIMIT} calls, resource_exhausted with Retry-After, and /v1 is refused too (one quota)`, async () => {
      const token = await limited.api.login(ALICE);
      const catalog = createClient(
        ContentService,
        createConnectTransport({ baseUrl: `${limited.mesh.gatewayUrl}/rpc`, httpVersion: "1.1" }),
      );
      let refused: ConnectError | undefined;
      for (let i = 0; i < RATE_LIMIT + 2 && !refused; i++) {
        try {
          await catalog.listCatalogItems({ page: 1, pageSize: 1 }, { headers: { authorization: `Bearer ${token}` } });
        } catch (err) {
          refused = ConnectError.from(err);
        }
      }
      expect(refused?.code).to.equal(Code.ResourceExhausted);
      expect(refused?.metadata.get("retry-after")).to.match(/^\d+$/);
      const v1 = await limited.api.get("/v1/catalog/items", { token });
      expect(v1.status, "the same quota").to.equal(429);
    });

    it("holds a caller to its live streams (GATEWAY_MAX_STREAMS_PER_CALLER, shared with the SSE feed): one more WatchPosts is resource_exhausted, and the slot comes back when the first ends", async () => {
      const token = await limited.api.login(BOB);
      const content = createClient(
        ContentService,
        createGrpcWebTransport({ baseUrl: `${limited.mesh.gatewayUrl}/rpc`, httpVersion: "1.1" }),
      );
      const headers = { authorization: `Bearer ${token}` };
      const open = async () => {
        const controller = new AbortController();
        const iterator = content.watchPosts({}, { headers, signal: controller.signal })[Symbol.asyncIterator]();
        const first = await iterator.next();
        return { subscribed: first.value?.subscribed === true, close: () => controller.abort() };
      };
      const one = await open();
      expect(one.subscribed).to.equal(true);
      const refused = await refusal(() => open());
      expect([Code[refused.code], refused.rawMessage]).to.deep.equal([
        "ResourceExhausted",
        "at most 1 live streams at once; close one first",
      ]);
      const sse = await fetch(`${limited.mesh.gatewayUrl}/v1/posts`, {
        headers: { ...headers, accept: "text/event-stream" },
      });
      expect(sse.status, "the SSE feed counts against the same slots").to.equal(429);
      await sse.body?.cancel();
      one.close();
      let again: { subscribed: boolean; close(): void } | undefined;
      for (let i = 0; i < 50 && !again; i++) {
        try {
          again = await open();
        } catch {
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      expect(again?.subscribed, "a slot back once the first stream ended").to.equal(true);
      again!.close();
    });

    it("counts the proxy's refusals by the quota that made them, as /v1's (not as identity's login throttle), whatever status the protocol says them with", async () => {
      const scrape = await (await fetch(`${limited.mesh.gatewayUrl}/metrics`)).text();
      const refused = (kind: string) =>
        Number(
          new RegExp(`^switchyard_gateway_rate_limited_total\\{[^}]*kind="${kind}"[^}]*\\} (\\S+)$`, "m").exec(
            scrape,
          )?.[1] ?? 0,
        );
      // The quota: one Connect refusal (429) and one /v1 refusal; the stream slots: one gRPC-Web refusal (in a 200's trailers) and one SSE 429.
      expect({ user: refused("user"), streams: refused("streams"), login: refused("login") }).to.deep.equal({
        user: 2,
        streams: 2,
        login: 0,
      });
    });
  });
});
