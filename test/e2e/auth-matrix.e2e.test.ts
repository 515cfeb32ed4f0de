// The authentication matrix, generated from the OpenAPI document: every operation that needs a token,
// sent well-formed but with each kind of bad credential — none, garbage, expired, a wrong signature,
// `alg: none`, a revoked session's, another tenant's, a member's where an admin is needed — gets the
// status its rule documents (401 with WWW-Authenticate for the first six), and no answer carries the
// other tenant's data. Public operations answer whatever credential comes along. A new operation
// without a request here fails this file.
import { expect } from "chai";
import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { parse } from "yaml";
import {
  ALICE,
  Api,
  BOB,
  b64url,
  CAROL,
  newKey,
  startE2eMesh,
  unique,
  type ApiResponse,
  type E2eMesh,
} from "../support/http.js";

const OPENAPI = parse(readFileSync(new URL("../../gateway/openapi/v1.yaml", import.meta.url), "utf8")) as {
  paths: Record<string, Record<string, any>>;
};
const METHODS = ["get", "put", "post", "delete", "patch"] as const;
const OPERATIONS = Object.entries(OPENAPI.paths).flatMap(([path, item]) =>
  METHODS.filter((m) => item[m]).map((m) => ({
    method: m.toUpperCase(),
    path,
    operationId: String(item[m].operationId),
    access: String(item[m]["x-switchyard-access"]),
    public: Array.isArray(item[m].security) && item[m].security.length === 0,
  })),
);

/** Short-lived tokens, so that one can be seen expire; every other token is fresh from a login. */
const TOKEN_TTL_SECONDS = 5;

type Credential =
  | "none"
  | "garbage"
  | "expired"
  | "wrong signature"
  | "alg none"
  | "revoked"
  | "another tenant's"
  | "a member where an admin is needed";
const BAD: readonly Credential[] = ["none", "garbage", "expired", "wrong signature", "alg none", "revoked"];

describe("e2e: authentication matrix — every operation × every kind of bad credential", function () {
  this.timeout(60_000);
  let env: E2eMesh;
  let api: Api;
  const MARK = `acme-only-${unique()}`;
  const fixtures = {} as {
    importJobId: string;
    orderId: number;
    paymentId: string;
    refundId: string;
    itemId: number;
    discountId: number;
    shipmentId: string;
    docId: string;
    postId: string;
    sessionId: string;
    bobId: number;
    throwawayId: number;
  };
  let expired = "";
  let revoked = "";

  const fresh = (who: { tenant: string; email: string }) => api.login(who);

  before(async function () {
    this.timeout(120_000);
    env = await startE2eMesh("auth-matrix", { env: { TOKEN_TTL_SECONDS: String(TOKEN_TTL_SECONDS) } });
    api = env.api;
    const expiring = fresh(BOB);
    const alice = await fresh(ALICE);
    const bob = await fresh(BOB);
    // acme's data, each piece carrying a mark no other tenant may ever see.
    const created = await api.post("/v1/orders", {
      token: bob,
      json: { currency: "EUR", items: [{ sku: "BOOK-1", quantity: 1 }], note: MARK },
    });
    expect(created.status, created.text).to.equal(201);
    const order = created.json;
    fixtures.orderId = order.id;
    fixtures.itemId = order.items[0].id;
    fixtures.discountId = (
      await api.post(`/v1/orders/${order.id}/discounts`, { token: alice, json: { code: "MARK", amount: 100 } })
    ).json.id;
    const shipped = (
      await api.post("/v1/orders", { token: bob, json: { currency: "EUR", items: [{ sku: "MUG-1", quantity: 1 }] } })
    ).json;
    fixtures.paymentId = new URL(
      `http://x${(await api.post(`/v1/orders/${shipped.id}/payment`, { token: bob, json: { source: MARK } })).headers.get("location")}`,
    ).pathname
      .split("/")
      .pop()!;
    fixtures.shipmentId = (
      await api.post(`/v1/orders/${shipped.id}/shipments`, { token: alice, json: { carrier: MARK } })
    ).json.id;
    fixtures.refundId = (
      await api.post(`/v1/payments/${fixtures.paymentId}/refunds`, {
        token: alice,
        key: newKey(),
        json: { amount: 1, reason: MARK },
      })
    ).json.id;
    fixtures.docId = (await api.post("/v1/docs", { token: bob, json: { title: MARK, body: MARK } })).json.id;
    fixtures.postId = (await api.post("/v1/posts", { token: bob, json: { title: MARK, body: MARK } })).json.id;
    // An import job of acme's (its item is public once imported, so it carries no mark).
    const imported = await api.post("/v1/catalog/imports", {
      token: alice,
      key: newKey(),
      json: [{ sku: `AUTH-MATRIX-${unique()}`, name: "Auth matrix fixture", price: 1, currency: "EUR" }],
    });
    expect(imported.status, imported.text).to.equal(202);
    fixtures.importJobId = imported.json.id;
    const login = await api.post("/v1/tenants/acme/sessions", {
      json: { email: BOB.email, password: "demo-password" },
    });
    fixtures.sessionId = login.json.id;
    fixtures.bobId = Number(JSON.parse(Buffer.from((await expiring).split(".")[1]!, "base64url").toString()).sub);
    // A revoked token: logged out, and refused by the gateway once the revocation reached it.
    const out = await api.post("/v1/tenants/acme/sessions", { json: { email: BOB.email, password: "demo-password" } });
    revoked = out.json.access_token;
    expect((await api.delete(`/v1/tenants/acme/sessions/${out.json.id}`, { token: revoked })).status).to.equal(204);
    for (let i = 0; i < 40 && (await api.get("/v1/payments?limit=1", { token: revoked })).status !== 401; i++)
      await sleep(50);
    // An expired token: its lifetime (plus the verifier's one second of leeway) has passed.
    expired = await expiring;
    await sleep(TOKEN_TTL_SECONDS * 1000 + 1_500);
  });
  after(async function () {
    this.timeout(60_000);
    await env?.stop();
  });

  /** A well-formed request for each operation, on acme's data: only the credential may be wrong. */
  const REQUESTS: Record<
    string,
    () => { path: string; json?: unknown; key?: string; headers?: Record<string, string> }
  > = {
    getOpenApiDocument: () => ({ path: "/v1/openapi.json" }),
    createSession: () => ({ path: "/v1/tenants/acme/sessions", json: { email: BOB.email, password: "demo-password" } }),
    getSession: () => ({ path: `/v1/tenants/acme/sessions/${fixtures.sessionId}` }),
    deleteSession: () => ({ path: `/v1/tenants/acme/sessions/${fixtures.sessionId}` }),
    listUsers: () => ({ path: "/v1/tenants/acme/users" }),
    createUser: () => ({
      path: "/v1/tenants/acme/users",
      json: { email: `never-${unique()}@acme.test`, full_name: "Never Made", password: "never-made-password" },
    }),
    getUser: () => ({ path: `/v1/tenants/acme/users/${fixtures.bobId}` }),
    deleteUser: () => ({ path: `/v1/tenants/acme/users/${fixtures.bobId}` }),
    createPayment: () => ({
      path: "/v1/payments",
      key: newKey(),
      json: { amount: 100, currency: "EUR", source: "tok_matrix" },
    }),
    listPayments: () => ({ path: "/v1/payments" }),
    getPayment: () => ({ path: `/v1/payments/${fixtures.paymentId}` }),
    createRefund: () => ({ path: `/v1/payments/${fixtures.paymentId}/refunds`, key: newKey(), json: { amount: 1 } }),
    listRefunds: () => ({ path: `/v1/payments/${fixtures.paymentId}/refunds` }),
    getRefund: () => ({ path: `/v1/payments/${fixtures.paymentId}/refunds/${fixtures.refundId}` }),
    createOrder: () => ({ path: "/v1/orders", json: { currency: "EUR", items: [{ sku: "PEN-1", quantity: 1 }] } }),
    getOrder: () => ({ path: `/v1/orders/${fixtures.orderId}` }),
    updateOrder: () => ({ path: `/v1/orders/${fixtures.orderId}`, json: { note: "changed?" } }),
    payOrder: () => ({ path: `/v1/orders/${fixtures.orderId}/payment`, json: { source: "tok_matrix" } }),
    createShipment: () => ({ path: `/v1/orders/${fixtures.orderId}/shipments`, json: {} }),
    listShipments: () => ({ path: `/v1/orders/${fixtures.orderId}/shipments` }),
    getShipment: () => ({ path: `/v1/orders/${fixtures.orderId}/shipments/${fixtures.shipmentId}` }),
    cancelOrder: () => ({ path: `/v1/orders/${fixtures.orderId}/cancel` }),
    listItems: () => ({ path: `/v1/orders/${fixtures.orderId}/items` }),
    addItem: () => ({ path: `/v1/orders/${fixtures.orderId}/items`, json: { sku: "MUG-1", quantity: 1 } }),
    getItem: () => ({ path: `/v1/orders/${fixtures.orderId}/items/${fixtures.itemId}` }),
    listDiscounts: () => ({ path: `/v1/orders/${fixtures.orderId}/discounts` }),
    addDiscount: () => ({ path: `/v1/orders/${fixtures.orderId}/discounts`, json: { code: "NOPE", amount: 1 } }),
    getDiscount: () => ({ path: `/v1/orders/${fixtures.orderId}/discounts/${fixtures.discountId}` }),
    listUserOrders: () => ({ path: `/v1/users/${fixtures.bobId}/orders` }),
    createDocument: () => ({ path: "/v1/docs", json: { title: "t", body: "b" } }),
    getDocument: () => ({ path: `/v1/docs/${fixtures.docId}` }),
    updateDocument: () => ({ path: `/v1/docs/${fixtures.docId}`, json: { title: "changed?", body: "changed?" } }),
    createPost: () => ({ path: "/v1/posts", json: { title: "t", body: "b" } }),
    listPosts: () => ({ path: "/v1/posts" }),
    getPost: () => ({ path: `/v1/posts/${fixtures.postId}` }),
    listCatalogItems: () => ({ path: "/v1/catalog/items" }),
    createCatalogImport: () => ({
      path: "/v1/catalog/imports",
      key: newKey(),
      json: [{ sku: `NEVER-${unique()}`, name: "Never imported", price: 1, currency: "EUR" }],
    }),
    getCatalogImport: () => ({ path: `/v1/catalog/imports/${fixtures.importJobId}` }),
  };

  /** The token each kind of credential sends (undefined: no Authorization header at all). */
  async function tokenFor(credential: Credential): Promise<string | undefined> {
    switch (credential) {
      case "none":
        return undefined;
      case "garbage":
        return "garbage";
      case "expired":
        return expired;
      case "wrong signature": {
        const [header, payload, signature] = (await fresh(BOB)).split(".");
        return `${header}.${payload}.${signature!.startsWith("A") ? "B" : "A"}${signature!.slice(1)}`;
      }
      case "alg none": {
        const payload = (await fresh(ALICE)).split(".")[1];
        return `${b64url({ alg: "none", typ: "JWT" })}.${payload}.`;
      }
      case "revoked":
        return revoked;
      case "another tenant's":
        return fresh(CAROL);
      case "a member where an admin is needed":
        return fresh(BOB);
    }
  }

  const send = async (op: (typeof OPERATIONS)[number], credential: Credential): Promise<ApiResponse> => {
    const request = REQUESTS[op.operationId]!();
    const token = await tokenFor(credential);
    return api.request(op.method, request.path, {
      ...(token === undefined ? {} : { token }),
      ...(request.json === undefined ? {} : { json: request.json }),
      ...(request.key ? { key: request.key } : {}),
    });
  };

  it("has a well-formed request for every operation of the document", () => {
    expect(
      OPERATIONS.map((o) => o.operationId).filter((id) => !REQUESTS[id]),
      "operations without a request here",
    ).to.deep.equal([]);
  });

  for (const op of OPERATIONS) {
    const label = `${op.method} ${op.path}`;
    if (op.public) {
      it(`${label} (public): answers alike whatever credential comes along`, async () => {
        for (const credential of BAD) {
          const res = await send(op, credential);
          expect(res.status, `${credential}: ${res.text.slice(0, 200)}`).to.be.within(200, 299);
          expect(res.text).to.not.include(MARK);
        }
      });
      continue;
    }
    for (const credential of BAD) {
      it(`${label}: ${credential} → 401 with WWW-Authenticate`, async () => {
        const res = await send(op, credential);
        expect(res.status, res.text).to.equal(401);
        expect(res.json.code).to.equal("UNAUTHENTICATED");
        expect(res.headers.get("www-authenticate"), "WWW-Authenticate").to.match(
          credential === "none" ? /^Bearer realm="switchyard"$/ : /^Bearer realm="switchyard", error="invalid_token"$/,
        );
        expect(res.text).to.not.include(MARK);
      });
    }
    it(`${label}: another tenant's token → what its rule (${op.access}) says, and nothing of acme`, async () => {
      const res = await send(op, "another tenant's");
      const expected = (() => {
        switch (op.access) {
          case "tenant":
          case "admin":
          case "session-owner":
            if (op.path.startsWith("/v1/tenants/{tenant_id}/")) return [403, "TENANT_MISMATCH"];
            return /\/\{[a-z_]+\}$/.test(op.path) ? [404, "NOT_FOUND"] : [200, undefined];
          case "owner":
          case "owner-admin":
            return [404, "NOT_FOUND"];
          case "catalog-owner":
            // Only the catalog owner tenant's (acme's) admins write the catalog.
            return [403, "TENANT_MISMATCH"];
          default:
            return [200, undefined];
        }
      })();
      if (expected[0] === 200) expect(res.status, res.text).to.be.within(200, 299);
      else {
        expect(res.status, res.text).to.equal(expected[0]);
        expect(res.json.code).to.equal(expected[1]);
      }
      expect(res.text, "no acme data reaches another tenant").to.not.include(MARK);
    });
    if (["admin", "owner-admin", "catalog-owner"].includes(op.access) || op.operationId === "listUserOrders") {
      it(`${label}: a member where an admin is needed → 403 ROLE_REQUIRED`, async () => {
        if (op.operationId === "listUserOrders") {
          // One's own list is the member's; another user's is the admin's.
          const res = await api.get("/v1/users/1/orders", { token: await fresh(BOB) });
          expect([res.status, res.json.code]).to.deep.equal([403, "ROLE_REQUIRED"]);
          return;
        }
        const res = await send(op, "a member where an admin is needed");
        expect([res.status, res.json.code], res.text).to.deep.equal([403, "ROLE_REQUIRED"]);
      });
    }
  }

  it("ends a live feed when the token it was opened with expires, saying so in the stream", async function () {
    this.timeout(30_000);
    const token = await fresh(BOB);
    const res = await fetch(`${env.mesh.gatewayUrl}/v1/posts`, {
      headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" },
    });
    expect(res.status).to.equal(200);
    const started = Date.now();
    const text = await res.text(); // ends only when the gateway ends the stream
    expect(Date.now() - started, "within the token's lifetime and a little").to.be.below(
      (TOKEN_TTL_SECONDS + 5) * 1000,
    );
    expect(text).to.match(
      /event: error\ndata: \{"error":"the live feed ended: the token has expired","code":"UNAUTHENTICATED"\}/,
    );
  });

  it("changed nothing of acme's: the order, the payment, the users are as they were", async () => {
    const alice = await fresh(ALICE);
    const order = (await api.get(`/v1/orders/${fixtures.orderId}`, { token: alice })).json;
    expect([order.status, order.note, order.items.length, order.discounts.length]).to.deep.equal([
      "pending",
      MARK,
      1,
      1,
    ]);
    const payment = (await api.get(`/v1/payments/${fixtures.paymentId}`, { token: alice })).json;
    expect(payment.amount_refunded).to.equal(1);
    expect(
      (await api.get(`/v1/tenants/acme/users/${fixtures.bobId}`, { token: alice })).status,
      "bob is still there",
    ).to.equal(200);
    expect((await api.get(`/v1/docs/${fixtures.docId}`, { token: alice })).json.body).to.equal(MARK);
  });
});
