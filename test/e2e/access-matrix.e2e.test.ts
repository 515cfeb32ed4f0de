// Who may do what, enforced inside the services, as a matrix driven by the OpenAPI document: every
// operation of gateway/openapi/v1.yaml states its rule in `x-switchyard-access`, and every operation
// is sent here as each of four actors — the owner member (bob), another member of the same tenant,
// the tenant's admin (alice) and a user of another tenant (carol, admin of globex) — with the status
// and error code the rule implies (the 2xx the document gives on success). A new operation without a
// rule, with a rule this file does not know, or without a case in the table below fails this file.
// Mutating calls get a fresh resource per actor, so one actor's success never changes what the next
// one sees; at the end, every refused mutation is read back to show it changed nothing.
import { expect } from "chai";
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import {
  ALICE,
  Api,
  BOB,
  CAROL,
  expectError,
  jwtPayload,
  newKey,
  startE2eMesh,
  unique,
  type ApiResponse,
  type E2eMesh,
} from "../support/http.js";

// ---------------------------------------------------------------------------------------------
// The document: every operation, its rule and its success status
// ---------------------------------------------------------------------------------------------

const OPENAPI = parse(readFileSync(new URL("../../gateway/openapi/v1.yaml", import.meta.url), "utf8")) as {
  paths: Record<string, Record<string, any>>;
};
const HTTP_METHODS = ["get", "put", "post", "delete", "patch", "head", "options", "trace"] as const;

const RULES = [
  "public",
  "tenant",
  "tenant-own-items",
  "owner",
  "owner-admin",
  "admin",
  "self-or-admin",
  "session-owner",
  "catalog-owner",
] as const;
type Rule = (typeof RULES)[number];
const isRule = (value: unknown): value is Rule =>
  typeof value === "string" && (RULES as readonly string[]).includes(value);

interface Operation {
  /** "POST /v1/orders/{order_id}/payment" */
  readonly key: string;
  readonly method: string;
  readonly path: string;
  readonly operationId: string;
  /** x-switchyard-access as written (possibly missing or unknown). */
  readonly access: unknown;
  /** The 2xx the document gives for success (201 over a replay's 200), or undefined when it gives none or several. */
  readonly successStatus: number | undefined;
}

function successStatusOf(method: string, operation: Record<string, any>): number | undefined {
  const codes = Object.keys(operation.responses ?? {})
    .filter((code) => /^2\d\d$/.test(code))
    .map(Number);
  if (codes.length === 1) return codes[0];
  // A create that also documents the 200 of an idempotent replay: success is the 201.
  if (method === "POST" && codes.includes(201)) return 201;
  return undefined;
}

const OPERATIONS: readonly Operation[] = Object.entries(OPENAPI.paths).flatMap(([path, item]) =>
  HTTP_METHODS.filter((m) => item[m] !== undefined).map((m) => {
    const operation = item[m] as Record<string, any>;
    const method = m.toUpperCase();
    return {
      key: `${method} ${path}`,
      method,
      path,
      operationId: String(operation.operationId),
      access: operation["x-switchyard-access"],
      successStatus: successStatusOf(method, operation),
    };
  }),
);

// ---------------------------------------------------------------------------------------------
// The actors and what each rule means for each of them
// ---------------------------------------------------------------------------------------------

const ACTORS = ["owner", "member", "admin", "other"] as const;
type Actor = (typeof ACTORS)[number];
const ACTOR_LABEL: Record<Actor, string> = {
  owner: "owner member",
  member: "other member",
  admin: "admin",
  other: "other tenant",
};

type Outcome = { readonly ok: true } | { readonly ok: false; readonly status: number; readonly code: string };
const OK: Outcome = { ok: true };
const refuse = (status: number, code: string): Outcome => ({ ok: false, status, code });
const NOT_FOUND = refuse(404, "NOT_FOUND");
const ROLE_REQUIRED = refuse(403, "ROLE_REQUIRED");
const TENANT_MISMATCH = refuse(403, "TENANT_MISMATCH");

const namesTenant = (path: string) => path.startsWith("/v1/tenants/{tenant_id}/");
const byId = (path: string) => /\/\{[a-z_]+\}$/.test(path);

/** What the rule (info.description, "Who may do what") promises this actor on this operation. */
function expectedOutcome(rule: Rule, op: Operation, actor: Actor): Outcome {
  switch (rule) {
    case "public":
      return OK;
    case "tenant":
      if (actor !== "other") return OK;
      // The path names the tenant: another tenant's token is refused outright. A resource by id of
      // another tenant does not exist for the caller. A create (or a list) is in the caller's own tenant.
      if (namesTenant(op.path)) return TENANT_MISMATCH;
      if (byId(op.path)) return NOT_FOUND;
      return OK;
    case "tenant-own-items":
      return OK;
    case "owner":
      return actor === "owner" || actor === "admin" ? OK : NOT_FOUND;
    case "owner-admin":
      return actor === "admin" ? OK : actor === "other" ? NOT_FOUND : ROLE_REQUIRED;
    case "admin":
      return actor === "admin" ? OK : actor === "other" ? TENANT_MISMATCH : ROLE_REQUIRED;
    case "self-or-admin":
      // The other tenant's user is an admin there; the list is always of the caller's tenant (empty).
      return actor === "member" ? ROLE_REQUIRED : OK;
    case "session-owner":
      return actor === "owner" ? OK : actor === "other" ? TENANT_MISMATCH : NOT_FOUND;
    case "catalog-owner":
      // The mesh's catalog belongs to acme (CATALOG_OWNER_TENANT): its admins write it, nobody else.
      return actor === "admin" ? OK : actor === "other" ? TENANT_MISMATCH : ROLE_REQUIRED;
  }
}

const outcomeText = (op: Operation, outcome: Outcome) =>
  outcome.ok ? String(op.successStatus ?? "2xx") : `${outcome.status} ${outcome.code}`;

// ---------------------------------------------------------------------------------------------
// Shapes used below
// ---------------------------------------------------------------------------------------------

interface OrderJson {
  id: number;
  user_id: number;
  status: string;
  note: string;
  items: { id: number; sku: string }[];
  discounts: { id: number }[];
  shipments: { id: string }[];
  payment_id: string | null;
  total: number;
  [key: string]: unknown;
}
interface PaymentJson {
  id: string;
  user_id: number | null;
  amount: number;
  amount_refunded: number;
  reference: string | null;
  [key: string]: unknown;
}

/** One call of a cell: the answer, and (for a mutation) how to read the state back afterwards. */
interface Attempt {
  res: ApiResponse;
  /** Reads the fixture back and asserts it is as it was before the call (run at the end, for refusals). */
  unchanged?: () => Promise<unknown>;
  /** Reads the fixture back after a success: the change is there. */
  changed?: () => Promise<unknown>;
}

interface OpCase {
  /** The rule the fixtures below were written for; must be the document's. */
  rule: Rule;
  /** Several cases for one operation (e.g. a payment bob made, and the payment of bob's order). */
  variant?: string;
  /** Builds what the call needs (fresh, for mutations) and sends it as the actor. */
  send(actor: Actor): Promise<Attempt>;
  /** On success, what this actor must (and must not) see. */
  ok?(actor: Actor, res: ApiResponse): unknown;
}

// ---------------------------------------------------------------------------------------------

describe("e2e: access matrix — every operation of the document × {owner member, other member, admin, other tenant}", function () {
  this.timeout(60_000);

  let env: E2eMesh;
  let api: Api;
  const tokens = {} as Record<Actor, string>;
  const ids = {} as Record<Actor, number>;
  const credentials = {} as Record<Actor, { tenant: string; email: string; password: string }>;
  const SECRET = `secret-note-${unique()}`;

  // Shared read-only fixtures, all bob's.
  let bobSession: { id: string };
  let readOrder: OrderJson; // pending, with an item, a discount and a secret note
  let shippedOrder: OrderJson; // paid by bob, shipped by alice
  let shipmentId: string;
  const payments = {} as Record<PaymentSource, { payment: PaymentJson; refundId: string }>;
  let bobDoc: { id: string };
  let bobPost: { id: string };
  let importJob: { id: string }; // alice's (an admin's: members may not import)

  // Refused mutations, read back at the end: operation (and variant) → checks.
  const readBacks = new Map<string, { actor: Actor; check: () => Promise<unknown> }[]>();

  // -------------------------------------------------------------------------------------------
  // Fixture helpers (bob owns; alice, the admin, reads back)
  // -------------------------------------------------------------------------------------------

  async function created(res: ApiResponse, what: string): Promise<any> {
    expect(res.status, `${what}: ${res.text}`).to.equal(201);
    return res.json;
  }

  async function bobsOrder(
    note = "original",
    items: { sku: string; quantity: number }[] = [{ sku: "BOOK-1", quantity: 1 }],
  ): Promise<OrderJson> {
    return created(
      await api.post("/v1/orders", { token: tokens.owner, json: { currency: "EUR", items, note } }),
      "bob's order",
    ) as Promise<OrderJson>;
  }

  async function bobsPaidOrder(): Promise<OrderJson> {
    const order = await bobsOrder();
    const paid = await created(
      await api.post(`/v1/orders/${order.id}/payment`, { token: tokens.owner, json: { source: "tok_visa" } }),
      "bob pays his order",
    );
    expect(paid.status).to.equal("paid");
    return paid as OrderJson;
  }

  async function bobsPayment(): Promise<PaymentJson> {
    return created(
      await api.post("/v1/payments", {
        token: tokens.owner,
        key: newKey(),
        json: { amount: 1_250, currency: "EUR", source: `tok_visa` },
      }),
      "bob's payment",
    ) as Promise<PaymentJson>;
  }

  type PaymentSource = "a payment bob made" | "the payment of bob's order";
  const PAYMENT_SOURCES: Record<PaymentSource, () => Promise<string>> = {
    "a payment bob made": async () => (await bobsPayment()).id,
    "the payment of bob's order": async () => (await bobsPaidOrder()).payment_id!,
  };

  async function read(path: string, token = tokens.admin): Promise<any> {
    const res = await api.get(path, { token });
    expect(res.status, `read back ${path}: ${res.text}`).to.equal(200);
    return res.json;
  }
  const orderOf = (id: number): Promise<OrderJson> => read(`/v1/orders/${id}`);
  const catalogSkus = async (): Promise<string[]> =>
    (await read("/v1/catalog/items?page_size=100")).items.map((i: { sku: string }) => i.sku);
  /** An import job, read (as alice) until it is no longer queued or running. */
  async function importFinished(location: string): Promise<any> {
    for (let i = 0; i < 300; i++) {
      const job = await read(location);
      if (job.status !== "queued" && job.status !== "running") return job;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`${location} did not finish`);
  }
  const paymentOf = (id: string): Promise<PaymentJson> => read(`/v1/payments/${id}`);

  async function throwawayUser(): Promise<{ id: number; email: string }> {
    const email = `throwaway-${unique()}@acme.test`;
    return created(
      await api.post("/v1/tenants/acme/users", {
        token: tokens.admin,
        json: { email, full_name: "Throw Away", password: "throwaway-password", role: "member" },
      }),
      "throwaway user",
    );
  }

  /** The fields of a resource that differ between two reads, as "field: before → after". */
  function changedFields(before: Record<string, unknown>, after: Record<string, unknown>): string[] {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
    return keys
      .filter((k) => JSON.stringify(before[k]) !== JSON.stringify(after[k]))
      .map((k) => `${k}: ${JSON.stringify(before[k])} → ${JSON.stringify(after[k])}`);
  }
  const expectSame = (what: string, before: Record<string, unknown>, after: Record<string, unknown>) =>
    expect(changedFields(before, after), `${what} changed`).to.deep.equal([]);

  /** The order must read back exactly as before the refused call. */
  const orderUnchanged = (before: OrderJson) => async () =>
    expectSame(`order ${before.id}`, before, await orderOf(before.id));

  const sendAs = (actor: Actor, method: string, path: string, options: { json?: unknown; key?: string } = {}) =>
    api.request(method, path, { token: tokens[actor], ...options });

  // -------------------------------------------------------------------------------------------
  // The case table: every operation of the document, keyed "METHOD /path"
  // -------------------------------------------------------------------------------------------

  const paymentCases = (make: (source: PaymentSource) => OpCase): OpCase[] =>
    (Object.keys(PAYMENT_SOURCES) as PaymentSource[]).map((source) => ({ ...make(source), variant: source }));

  const CASES: Record<string, OpCase[]> = {
    "GET /v1/openapi.json": [
      {
        rule: "public",
        send: async (actor) => ({ res: await sendAs(actor, "GET", "/v1/openapi.json") }),
        ok: (_actor, res) =>
          expect(Object.keys(res.json.paths).sort()).to.deep.equal(Object.keys(OPENAPI.paths).sort()),
      },
    ],
    "POST /v1/tenants/{tenant_id}/sessions": [
      {
        rule: "public",
        send: async (actor) => {
          const { tenant, email, password } = credentials[actor];
          return { res: await sendAs(actor, "POST", `/v1/tenants/${tenant}/sessions`, { json: { email, password } }) };
        },
        ok: (actor, res) => {
          expect(res.json.access_token).to.be.a("string");
          expect(Number(jwtPayload(res.json.access_token).sub), "the session is the actor's own").to.equal(ids[actor]);
        },
      },
    ],
    "GET /v1/tenants/{tenant_id}/sessions/{session_id}": [
      {
        rule: "session-owner",
        send: async (actor) => ({ res: await sendAs(actor, "GET", `/v1/tenants/acme/sessions/${bobSession.id}`) }),
        ok: (_actor, res) => expect(res.json).to.include({ id: bobSession.id, user_id: ids.owner }),
      },
    ],
    "DELETE /v1/tenants/{tenant_id}/sessions/{session_id}": [
      {
        rule: "session-owner",
        send: async (actor) => {
          // A fresh session of bob's for each actor: logging out is for good.
          const login = await created(
            await api.post("/v1/tenants/acme/sessions", { json: { email: BOB.email, password: "demo-password" } }),
            "bob's session to log out",
          );
          const res = await sendAs(actor, "DELETE", `/v1/tenants/acme/sessions/${login.id}`);
          return {
            res,
            unchanged: async () =>
              expect(
                (await api.get("/v1/payments?limit=1", { token: login.access_token })).status,
                "bob's token still works",
              ).to.equal(200),
            changed: async () => {
              let status = 0;
              for (const until = Date.now() + 2_000; Date.now() < until;) {
                status = (await api.get("/v1/payments?limit=1", { token: login.access_token })).status;
                if (status === 401) break;
              }
              expect(status, "the logged-out token is refused within 2 s").to.equal(401);
            },
          };
        },
      },
    ],
    "GET /v1/tenants/{tenant_id}/users": [
      {
        rule: "tenant",
        send: async (actor) => ({ res: await sendAs(actor, "GET", "/v1/tenants/acme/users?limit=100") }),
        ok: async (actor) => {
          const users = await api.listAll("/v1/tenants/acme/users", tokens[actor]);
          expect(users.map((u) => u.id)).to.include(ids.owner);
        },
      },
    ],
    "POST /v1/tenants/{tenant_id}/users": [
      {
        rule: "admin",
        send: async (actor) => {
          const email = `made-by-${actor}-${unique()}@acme.test`;
          const password = "made-by-password";
          const res = await sendAs(actor, "POST", "/v1/tenants/acme/users", {
            json: { email, full_name: `Made by ${actor}`, password, role: "member" },
          });
          return {
            res,
            unchanged: async () => {
              const users = await api.listAll("/v1/tenants/acme/users", tokens.admin);
              expect(
                users.map((u) => u.email),
                "no user was created",
              ).not.to.include(email);
              expect(
                (await api.post("/v1/tenants/acme/sessions", { json: { email, password } })).status,
                "nobody can log in as it",
              ).to.equal(401);
            },
          };
        },
        ok: async (_actor, res) => {
          expect(res.json).to.include({ role: "member" });
          expect((await read(`/v1/tenants/acme/users/${res.json.id}`)).email).to.equal(res.json.email);
        },
      },
    ],
    "GET /v1/tenants/{tenant_id}/users/{user_id}": [
      {
        rule: "tenant",
        send: async (actor) => ({ res: await sendAs(actor, "GET", `/v1/tenants/acme/users/${ids.owner}`) }),
        ok: (_actor, res) => expect(res.json).to.include({ id: ids.owner, email: BOB.email }),
      },
    ],
    "DELETE /v1/tenants/{tenant_id}/users/{user_id}": [
      {
        rule: "admin",
        send: async (actor) => {
          const user = await throwawayUser();
          const before = await read(`/v1/tenants/acme/users/${user.id}`);
          const res = await sendAs(actor, "DELETE", `/v1/tenants/acme/users/${user.id}`);
          return {
            res,
            unchanged: async () =>
              expectSame(`user ${user.id}`, before, await read(`/v1/tenants/acme/users/${user.id}`)),
            changed: async () =>
              expectError(
                await api.get(`/v1/tenants/acme/users/${user.id}`, { token: tokens.admin }),
                404,
                "NOT_FOUND",
              ),
          };
        },
        ok: async (_actor, res) => {
          expect(res.text).to.equal("");
        },
      },
    ],
    "POST /v1/payments": [
      {
        rule: "tenant",
        send: async (actor) => ({
          res: await sendAs(actor, "POST", "/v1/payments", {
            key: newKey(),
            json: { amount: 777, currency: "EUR", source: "tok_visa" },
          }),
        }),
        ok: async (actor, res) => {
          expect(res.json).to.include({ amount: 777, user_id: ids[actor] });
          expect((await read(`/v1/payments/${res.json.id}`, tokens[actor])).id, "the creator reads it").to.equal(
            res.json.id,
          );
          // Made in the actor's own tenant: invisible to acme's admin when carol made it.
          if (actor === "other")
            expectError(await api.get(`/v1/payments/${res.json.id}`, { token: tokens.admin }), 404, "NOT_FOUND");
          else expect((await read(`/v1/payments/${res.json.id}`)).id).to.equal(res.json.id);
        },
      },
    ],
    "GET /v1/payments": [
      {
        rule: "tenant-own-items",
        send: async (actor) => ({ res: await sendAs(actor, "GET", "/v1/payments?limit=100") }),
        ok: async (actor) => {
          const listed = (await api.listAll("/v1/payments", tokens[actor])) as PaymentJson[];
          const listedIds = listed.map((p) => p.id);
          const bobs = Object.values(payments).map((p) => p.payment.id);
          if (actor === "owner" || actor === "admin")
            expect(listedIds, `${actor} sees bob's payments`).to.include.members(bobs);
          else for (const id of bobs) expect(listedIds, `${actor} does not see bob's payment ${id}`).not.to.include(id);
          if (actor === "owner" || actor === "member") {
            expect(
              listed.filter((p) => p.user_id !== ids[actor]).map((p) => p.id),
              "a member's list holds only their own payments",
            ).to.deep.equal([]);
          }
        },
      },
    ],
    "GET /v1/payments/{payment_id}": paymentCases((source) => ({
      rule: "owner",
      send: async (actor) => ({ res: await sendAs(actor, "GET", `/v1/payments/${payments[source].payment.id}`) }),
      ok: (_actor, res) => expect(res.json).to.include({ id: payments[source].payment.id, user_id: ids.owner }),
    })),
    "POST /v1/payments/{payment_id}/refunds": paymentCases((source) => ({
      rule: "owner-admin",
      send: async (actor) => {
        const paymentId = await PAYMENT_SOURCES[source]();
        const before = await paymentOf(paymentId);
        const res = await sendAs(actor, "POST", `/v1/payments/${paymentId}/refunds`, {
          key: newKey(),
          json: { amount: 100, reason: `by ${actor}` },
        });
        return {
          res,
          unchanged: async () => {
            expectSame(`payment ${paymentId}`, before, await paymentOf(paymentId));
            expect((await read(`/v1/payments/${paymentId}/refunds`)).items, "no refund").to.deep.equal([]);
          },
          changed: async () =>
            expect(await paymentOf(paymentId)).to.include({ amount_refunded: before.amount_refunded + 100 }),
        };
      },
      ok: (_actor, res) => expect(res.json).to.include({ amount: 100 }),
    })),
    "GET /v1/payments/{payment_id}/refunds": paymentCases((source) => ({
      rule: "owner",
      send: async (actor) => ({
        res: await sendAs(actor, "GET", `/v1/payments/${payments[source].payment.id}/refunds`),
      }),
      ok: (_actor, res) =>
        expect(res.json.items.map((r: { id: string }) => r.id)).to.deep.equal([payments[source].refundId]),
    })),
    "GET /v1/payments/{payment_id}/refunds/{refund_id}": paymentCases((source) => ({
      rule: "owner",
      send: async (actor) => ({
        res: await sendAs(
          actor,
          "GET",
          `/v1/payments/${payments[source].payment.id}/refunds/${payments[source].refundId}`,
        ),
      }),
      ok: (_actor, res) =>
        expect(res.json).to.include({ id: payments[source].refundId, payment_id: payments[source].payment.id }),
    })),
    "POST /v1/orders": [
      {
        rule: "tenant",
        send: async (actor) => ({
          res: await sendAs(actor, "POST", "/v1/orders", {
            json: { currency: "EUR", items: [{ sku: "PEN-1", quantity: 1 }] },
          }),
        }),
        ok: async (actor, res) => {
          expect(res.json).to.include({ user_id: ids[actor], status: "pending", total: 2_500 });
          expect((await read(`/v1/orders/${res.json.id}`, tokens[actor])).id, "the creator reads it").to.equal(
            res.json.id,
          );
          if (actor === "other")
            expectError(await api.get(`/v1/orders/${res.json.id}`, { token: tokens.admin }), 404, "NOT_FOUND");
          else expect((await orderOf(res.json.id)).user_id).to.equal(ids[actor]);
        },
      },
    ],
    "GET /v1/orders/{order_id}": [
      {
        rule: "owner",
        send: async (actor) => ({ res: await sendAs(actor, "GET", `/v1/orders/${readOrder.id}`) }),
        ok: (_actor, res) => expect(res.json).to.include({ id: readOrder.id, user_id: ids.owner, note: SECRET }),
      },
    ],
    "PATCH /v1/orders/{order_id}": [
      {
        rule: "owner",
        send: async (actor) => {
          const order = await bobsOrder();
          const before = await orderOf(order.id);
          return {
            res: await sendAs(actor, "PATCH", `/v1/orders/${order.id}`, { json: { note: `changed by ${actor}` } }),
            unchanged: orderUnchanged(before),
            changed: async () => expect((await orderOf(order.id)).note).to.equal(`changed by ${actor}`),
          };
        },
        ok: (actor, res) => expect(res.json).to.include({ note: `changed by ${actor}`, user_id: ids.owner }),
      },
    ],
    "POST /v1/orders/{order_id}/payment": [
      {
        rule: "owner",
        send: async (actor) => {
          const order = await bobsOrder();
          const before = await orderOf(order.id);
          const res = await sendAs(actor, "POST", `/v1/orders/${order.id}/payment`, { json: { source: "tok_visa" } });
          return {
            res,
            unchanged: async () => {
              await orderUnchanged(before)();
              expect(before).to.include({ status: "pending", payment_id: null });
              const all = (await api.listAll("/v1/payments", tokens.admin)) as PaymentJson[];
              expect(
                all.filter((p) => p.reference === `order:${order.id}`),
                "no payment was made for the order",
              ).to.deep.equal([]);
            },
            changed: async () => expect(await orderOf(order.id)).to.include({ status: "paid", user_id: ids.owner }),
          };
        },
        ok: async (_actor, res) => {
          expect(res.json).to.include({ status: "paid", user_id: ids.owner });
          expect(res.headers.get("location")).to.equal(`/v1/payments/${res.json.payment_id}`);
          // Whoever paid, the charge is the order owner's.
          expect(await read(`/v1/payments/${res.json.payment_id}`, tokens.owner)).to.include({
            user_id: ids.owner,
            reference: `order:${res.json.id}`,
          });
        },
      },
    ],
    "POST /v1/orders/{order_id}/shipments": [
      {
        rule: "owner-admin",
        send: async (actor) => {
          const order = await bobsPaidOrder();
          const before = await orderOf(order.id);
          return {
            res: await sendAs(actor, "POST", `/v1/orders/${order.id}/shipments`, {
              json: { carrier: "DHL", tracking_number: `T-${actor}` },
            }),
            unchanged: orderUnchanged(before),
            changed: async () => expect(await orderOf(order.id)).to.include({ status: "shipped" }),
          };
        },
        ok: (actor, res) => expect(res.json).to.include({ carrier: "DHL", tracking_number: `T-${actor}` }),
      },
    ],
    "GET /v1/orders/{order_id}/shipments": [
      {
        rule: "owner",
        send: async (actor) => ({ res: await sendAs(actor, "GET", `/v1/orders/${shippedOrder.id}/shipments`) }),
        ok: (_actor, res) => expect(res.json.items.map((s: { id: string }) => s.id)).to.deep.equal([shipmentId]),
      },
    ],
    "GET /v1/orders/{order_id}/shipments/{shipment_id}": [
      {
        rule: "owner",
        send: async (actor) => ({
          res: await sendAs(actor, "GET", `/v1/orders/${shippedOrder.id}/shipments/${shipmentId}`),
        }),
        ok: (_actor, res) => expect(res.json).to.include({ id: shipmentId, order_id: shippedOrder.id }),
      },
    ],
    "POST /v1/orders/{order_id}/cancel": [
      {
        rule: "owner",
        send: async (actor) => {
          const order = await bobsOrder();
          const before = await orderOf(order.id);
          return {
            res: await sendAs(actor, "POST", `/v1/orders/${order.id}/cancel`),
            unchanged: orderUnchanged(before),
            changed: async () => expect(await orderOf(order.id)).to.include({ status: "cancelled" }),
          };
        },
        ok: (_actor, res) => expect(res.json).to.include({ status: "cancelled", user_id: ids.owner }),
      },
    ],
    "GET /v1/orders/{order_id}/items": [
      {
        rule: "owner",
        send: async (actor) => ({ res: await sendAs(actor, "GET", `/v1/orders/${readOrder.id}/items`) }),
        ok: (_actor, res) =>
          expect(res.json.items.map((i: { id: number }) => i.id)).to.deep.equal(readOrder.items.map((i) => i.id)),
      },
    ],
    "POST /v1/orders/{order_id}/items": [
      {
        rule: "owner",
        send: async (actor) => {
          const order = await bobsOrder();
          const before = await orderOf(order.id);
          return {
            res: await sendAs(actor, "POST", `/v1/orders/${order.id}/items`, { json: { sku: "MUG-1", quantity: 1 } }),
            unchanged: orderUnchanged(before),
            changed: async () => expect((await orderOf(order.id)).total, "BOOK-1 + MUG-1").to.equal(2_400),
          };
        },
        ok: (_actor, res) => expect(res.json).to.include({ sku: "MUG-1", quantity: 1, unit_price: 900 }),
      },
    ],
    "GET /v1/orders/{order_id}/items/{item_id}": [
      {
        rule: "owner",
        send: async (actor) => ({
          res: await sendAs(actor, "GET", `/v1/orders/${readOrder.id}/items/${readOrder.items[0]!.id}`),
        }),
        ok: (_actor, res) => expect(res.json).to.include({ id: readOrder.items[0]!.id, sku: "BOOK-1" }),
      },
    ],
    "GET /v1/orders/{order_id}/discounts": [
      {
        rule: "owner",
        send: async (actor) => ({ res: await sendAs(actor, "GET", `/v1/orders/${readOrder.id}/discounts`) }),
        ok: (_actor, res) =>
          expect(res.json.items.map((d: { id: number }) => d.id)).to.deep.equal(readOrder.discounts.map((d) => d.id)),
      },
    ],
    "POST /v1/orders/{order_id}/discounts": [
      {
        rule: "owner-admin",
        send: async (actor) => {
          const order = await bobsOrder();
          const before = await orderOf(order.id);
          return {
            res: await sendAs(actor, "POST", `/v1/orders/${order.id}/discounts`, {
              json: { code: `BY-${actor.toUpperCase()}`, amount: 100 },
            }),
            unchanged: orderUnchanged(before),
            changed: async () => expect((await orderOf(order.id)).total, "BOOK-1 − 100").to.equal(1_400),
          };
        },
        ok: (actor, res) => expect(res.json).to.include({ code: `BY-${actor.toUpperCase()}`, amount: 100 }),
      },
    ],
    "GET /v1/orders/{order_id}/discounts/{discount_id}": [
      {
        rule: "owner",
        send: async (actor) => ({
          res: await sendAs(actor, "GET", `/v1/orders/${readOrder.id}/discounts/${readOrder.discounts[0]!.id}`),
        }),
        ok: (_actor, res) => expect(res.json).to.include({ id: readOrder.discounts[0]!.id, code: "WELCOME" }),
      },
    ],
    "GET /v1/users/{user_id}/orders": [
      {
        rule: "self-or-admin",
        send: async (actor) => ({ res: await sendAs(actor, "GET", `/v1/users/${ids.owner}/orders?limit=100`) }),
        ok: async (actor, res) => {
          if (actor === "other") {
            // The list is of the caller's tenant: globex has no order of acme's user id.
            expect(res.json, "carol's answer").to.deep.equal({ items: [], next_cursor: null });
            return;
          }
          const listed = (await api.listAll(`/v1/users/${ids.owner}/orders`, tokens[actor])) as OrderJson[];
          expect(listed.map((o) => o.id)).to.include.members([readOrder.id, shippedOrder.id]);
          expect(
            listed.filter((o) => o.user_id !== ids.owner).map((o) => o.id),
            "only bob's orders",
          ).to.deep.equal([]);
        },
      },
    ],
    "POST /v1/docs": [
      {
        rule: "tenant",
        send: async (actor) => ({
          res: await sendAs(actor, "POST", "/v1/docs", { json: { title: `Doc of ${actor}`, body: "v1" } }),
        }),
        ok: async (actor, res) => {
          expect(res.json).to.include({ title: `Doc of ${actor}`, body: "v1" });
          expect((await read(`/v1/docs/${res.json.id}`, tokens[actor])).id).to.equal(res.json.id);
          if (actor === "other")
            expectError(await api.get(`/v1/docs/${res.json.id}`, { token: tokens.owner }), 404, "NOT_FOUND");
          else expectError(await api.get(`/v1/docs/${res.json.id}`, { token: tokens.other }), 404, "NOT_FOUND");
        },
      },
    ],
    "GET /v1/docs/{doc_id}": [
      {
        rule: "tenant",
        send: async (actor) => ({ res: await sendAs(actor, "GET", `/v1/docs/${bobDoc.id}`) }),
        ok: (_actor, res) => expect(res.json).to.include({ id: bobDoc.id, body: SECRET }),
      },
    ],
    "PUT /v1/docs/{doc_id}": [
      {
        rule: "tenant",
        send: async (actor) => {
          const doc = await created(
            await api.post("/v1/docs", { token: tokens.owner, json: { title: "Bob's runbook", body: "original" } }),
            "bob's doc",
          );
          const before = await read(`/v1/docs/${doc.id}`, tokens.owner);
          const res = await sendAs(actor, "PUT", `/v1/docs/${doc.id}`, {
            json: { title: "Bob's runbook", body: `changed by ${actor}` },
          });
          return {
            res,
            unchanged: async () =>
              expectSame(`document ${doc.id}`, before, await read(`/v1/docs/${doc.id}`, tokens.owner)),
            changed: async () =>
              expect((await read(`/v1/docs/${doc.id}`, tokens.owner)).body).to.equal(`changed by ${actor}`),
          };
        },
        ok: (actor, res) => expect(res.json).to.include({ body: `changed by ${actor}` }),
      },
    ],
    "POST /v1/posts": [
      {
        rule: "tenant",
        send: async (actor) => ({
          res: await sendAs(actor, "POST", "/v1/posts", { json: { title: `Post of ${actor}`, body: "hello" } }),
        }),
        ok: async (actor, res) => {
          expect(res.json).to.include({ title: `Post of ${actor}`, author_id: ids[actor] });
          expect((await read(`/v1/posts/${res.json.id}`, tokens[actor])).id).to.equal(res.json.id);
          if (actor === "other")
            expectError(await api.get(`/v1/posts/${res.json.id}`, { token: tokens.owner }), 404, "NOT_FOUND");
          else expectError(await api.get(`/v1/posts/${res.json.id}`, { token: tokens.other }), 404, "NOT_FOUND");
        },
      },
    ],
    "GET /v1/posts": [
      {
        rule: "tenant",
        send: async (actor) => ({ res: await sendAs(actor, "GET", "/v1/posts?limit=100") }),
        ok: async (actor) => {
          const listed = (await api.listAll("/v1/posts", tokens[actor])).map((p: { id: string }) => p.id);
          if (actor === "other") expect(listed, "another tenant's feed").not.to.include(bobPost.id);
          else expect(listed).to.include(bobPost.id);
        },
      },
    ],
    "GET /v1/posts/{post_id}": [
      {
        rule: "tenant",
        send: async (actor) => ({ res: await sendAs(actor, "GET", `/v1/posts/${bobPost.id}`) }),
        ok: (_actor, res) => expect(res.json).to.include({ id: bobPost.id, author_id: ids.owner, body: SECRET }),
      },
    ],
    "POST /v1/catalog/imports": [
      {
        rule: "catalog-owner",
        send: async (actor) => {
          const sku = `IMPORTED-BY-${actor.toUpperCase()}-${unique()}`;
          const res = await sendAs(actor, "POST", "/v1/catalog/imports", {
            key: newKey(),
            json: [{ sku, name: `Imported by ${actor}`, price: 100, currency: "EUR" }],
          });
          return {
            res,
            unchanged: async () => expect(await catalogSkus(), "nothing imported").not.to.include(sku),
            changed: async () => {
              expect((await importFinished(res.headers.get("location")!)).status).to.equal("succeeded");
              expect(await catalogSkus()).to.include(sku);
            },
          };
        },
        ok: (_actor, res) => {
          expect(res.headers.get("location")).to.equal(`/v1/catalog/imports/${res.json.id}`);
          expect(res.json).to.deep.include({ status: "queued", counts: { received: 1, imported: 0, failed: 0 } });
        },
      },
    ],
    "GET /v1/catalog/imports/{job_id}": [
      {
        rule: "owner-admin",
        send: async (actor) => ({ res: await sendAs(actor, "GET", `/v1/catalog/imports/${importJob.id}`) }),
        ok: (_actor, res) =>
          expect(res.json).to.deep.include({
            id: importJob.id,
            status: "succeeded",
            counts: { received: 1, imported: 1, failed: 0 },
          }),
      },
    ],
    "GET /v1/catalog/items": [
      {
        rule: "public",
        send: async (actor) => ({ res: await sendAs(actor, "GET", "/v1/catalog/items?page_size=100") }),
        ok: (_actor, res) =>
          expect(res.json.items.map((i: { sku: string }) => i.sku)).to.include.members([
            "BOOK-1",
            "MUG-1",
            "PEN-1",
            "SHIRT-1",
            "STICKER-1",
          ]),
      },
    ],
  };

  // -------------------------------------------------------------------------------------------

  before(async function () {
    this.timeout(120_000);
    env = await startE2eMesh("access");
    api = env.api;
    [tokens.owner, tokens.admin, tokens.other] = await Promise.all([
      api.login(BOB),
      api.login(ALICE),
      api.login(CAROL),
    ]);

    // The other member: a second acme member, made by alice.
    const member = { tenant: "acme", email: `other-member-${unique()}@acme.test`, password: "other-member-password" };
    const made = await api.post("/v1/tenants/acme/users", {
      token: tokens.admin,
      json: { email: member.email, full_name: "Other Member", password: member.password, role: "member" },
    });
    expect(made.status, made.text).to.equal(201);
    tokens.member = await api.login(member, member.password);

    credentials.owner = { ...BOB, password: "demo-password" };
    credentials.member = member;
    credentials.admin = { ...ALICE, password: "demo-password" };
    credentials.other = { ...CAROL, password: "demo-password" };
    for (const actor of ACTORS) ids[actor] = Number(jwtPayload(tokens[actor]).sub);
    expect(ids.member).to.equal(made.json.id);
    expect(ids.admin, "alice is user 1").to.equal(1);
    expect(new Set([ids.owner, ids.member, ids.admin]).size, "three distinct acme users").to.equal(3);

    // bob's own session, from a login of its own.
    bobSession = await created(
      await api.post("/v1/tenants/acme/sessions", { json: { email: BOB.email, password: "demo-password" } }),
      "bob's session",
    );

    // A pending order with an item, a discount (alice's) and a secret note.
    const order = await bobsOrder(SECRET, [{ sku: "BOOK-1", quantity: 2 }]);
    await created(
      await api.post(`/v1/orders/${order.id}/discounts`, {
        token: tokens.admin,
        json: { code: "WELCOME", amount: 500 },
      }),
      "alice's discount",
    );
    readOrder = await orderOf(order.id);
    expect(readOrder.items).to.have.length(1);
    expect(readOrder.discounts).to.have.length(1);

    // A shipped order: bob pays, alice ships.
    const paid = await bobsPaidOrder();
    shipmentId = (
      await created(
        await api.post(`/v1/orders/${paid.id}/shipments`, { token: tokens.admin, json: { carrier: "UPS" } }),
        "alice ships",
      )
    ).id;
    shippedOrder = await orderOf(paid.id);

    // Two payments of bob's, each with one refund (alice's).
    for (const source of Object.keys(PAYMENT_SOURCES) as PaymentSource[]) {
      const paymentId = await PAYMENT_SOURCES[source]();
      const refund = await created(
        await api.post(`/v1/payments/${paymentId}/refunds`, {
          token: tokens.admin,
          key: newKey(),
          json: { amount: 100 },
        }),
        "alice refunds",
      );
      payments[source] = { payment: await paymentOf(paymentId), refundId: refund.id };
      expect(payments[source].payment.user_id, `${source} is bob's`).to.equal(ids.owner);
    }

    bobDoc = await created(
      await api.post("/v1/docs", { token: tokens.owner, json: { title: "Bob's doc", body: SECRET } }),
      "bob's doc",
    );
    bobPost = await created(
      await api.post("/v1/posts", { token: tokens.owner, json: { title: "Bob's post", body: SECRET } }),
      "bob's post",
    );

    // An import job of acme's (the catalog's owner), run to its end.
    const imported = await api.post("/v1/catalog/imports", {
      token: tokens.admin,
      key: newKey(),
      json: [{ sku: `FIXTURE-${unique()}`, name: "Fixture", price: 1, currency: "EUR" }],
    });
    expect(imported.status, imported.text).to.equal(202);
    importJob = await importFinished(imported.headers.get("location")!);
    expect(importJob).to.include({ status: "succeeded" });
  });

  after(async function () {
    this.timeout(60_000);
    await env?.stop();
  });

  // -------------------------------------------------------------------------------------------
  // The document and the table agree
  // -------------------------------------------------------------------------------------------

  describe("the document states a rule for every operation, and the table covers each", () => {
    it("every operation carries x-switchyard-access with a known rule", () => {
      const problems = OPERATIONS.filter((op) => !isRule(op.access)).map(
        (op) => `${op.key} (${op.operationId}): x-switchyard-access ${JSON.stringify(op.access)}`,
      );
      expect(problems, `operations without a known rule (known: ${RULES.join(", ")})`).to.deep.equal([]);
    });

    it("every operation has a case in the access matrix, written for the rule the document states", () => {
      const problems: string[] = [];
      for (const op of OPERATIONS) {
        const cases = CASES[op.key];
        if (!cases || cases.length === 0) problems.push(`${op.key} (${op.operationId}): no case`);
        else
          for (const c of cases)
            if (c.rule !== op.access)
              problems.push(
                `${op.key}: the case is written for ${c.rule}, the document says ${JSON.stringify(op.access)}`,
              );
      }
      for (const key of Object.keys(CASES))
        if (!OPERATIONS.some((op) => op.key === key))
          problems.push(`${key}: a case for an operation the document does not have`);
      expect(problems).to.deep.equal([]);
    });

    it("every operation documents the one 2xx status it answers on success", () => {
      expect(OPERATIONS.filter((op) => op.successStatus === undefined).map((op) => op.key)).to.deep.equal([]);
    });

    it("the public operations answer without any token", async () => {
      for (const op of OPERATIONS.filter((o) => o.access === "public")) {
        const path = op.path.replace("{tenant_id}", "acme");
        const res = await api.request(
          op.method,
          path,
          op.method === "POST" ? { json: { email: BOB.email, password: "demo-password" } } : {},
        );
        expect(res.status, `${op.key} without a token: ${res.text}`).to.equal(op.successStatus);
      }
    });
  });

  // -------------------------------------------------------------------------------------------
  // The matrix
  // -------------------------------------------------------------------------------------------

  for (const op of OPERATIONS) {
    const rule = op.access;
    const cases = CASES[op.key] ?? [];
    if (cases.length === 0)
      it(`${op.key} (${String(rule)}): has a case in the access matrix`, () =>
        expect.fail(`${op.key} (${op.operationId}) has no case in the access matrix`));
    for (const opCase of cases) {
      const label = `${op.key} (${String(rule)})${opCase.variant ? ` [${opCase.variant}]` : ""}`;
      describe(label, () => {
        for (const actor of ACTORS) {
          if (!isRule(rule)) {
            it(`${label}: ${ACTOR_LABEL[actor]} → (no known rule)`, () =>
              expect.fail(`${op.key} has no known x-switchyard-access rule`));
            continue;
          }
          const outcome = expectedOutcome(rule, op, actor);
          it(`${label}: ${ACTOR_LABEL[actor]} → ${outcomeText(op, outcome)}`, async () => {
            const attempt = await opCase.send(actor);
            if (!outcome.ok && attempt.unchanged) {
              const checks = readBacks.get(label) ?? [];
              checks.push({ actor, check: attempt.unchanged });
              readBacks.set(label, checks);
            }
            const { res } = attempt;
            if (outcome.ok) {
              expect(res.status, `${ACTOR_LABEL[actor]}: ${res.text}`).to.equal(op.successStatus);
              await opCase.ok?.(actor, res);
              await attempt.changed?.();
            } else {
              expectError(res, outcome.status, outcome.code);
              // A refusal names nothing of the resource: no note, no sku, no email of bob's.
              for (const secret of [SECRET, "BOOK-1", BOB.email])
                expect(res.text, "the refusal leaks nothing").not.to.include(secret);
            }
          });
        }
      });
    }
  }

  // -------------------------------------------------------------------------------------------
  // Read back: the refused mutations changed nothing
  // -------------------------------------------------------------------------------------------

  describe("afterwards, every refused mutation has changed nothing (state read back)", () => {
    for (const op of OPERATIONS) {
      if (!isRule(op.access)) continue;
      const rule = op.access;
      for (const opCase of CASES[op.key] ?? []) {
        const label = `${op.key} (${rule})${opCase.variant ? ` [${opCase.variant}]` : ""}`;
        const refused = ACTORS.filter((actor) => !expectedOutcome(rule, op, actor).ok);
        if (op.method === "GET" || refused.length === 0) continue;
        it(`${label}: unchanged after the attempts of ${refused.map((a) => ACTOR_LABEL[a]).join(", ")}`, async () => {
          const checks = readBacks.get(label) ?? [];
          expect(
            checks.map((c) => c.actor),
            "every refused attempt was made",
          ).to.deep.equal(refused);
          const failures: string[] = [];
          for (const { actor, check } of checks) {
            try {
              await check();
            } catch (err) {
              failures.push(`after the ${ACTOR_LABEL[actor]}'s attempt: ${(err as Error).message}`);
            }
          }
          expect(failures).to.deep.equal([]);
        });
      }
    }
  });
});
