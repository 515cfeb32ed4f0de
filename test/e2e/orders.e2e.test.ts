// Orders end to end through the real multi-process mesh (identity, payments, orders, content, gateway),
// over HTTP: contents and totals priced from the catalog (PRICE_CHANGED, UNKNOWN_SKU,
// CURRENCY_MISMATCH), the action resources (payment, shipments, cancel) and their guards, PATCH that
// never writes the status, who may do what (members their own orders, admins every order of the
// tenant; refunds, shipments and discounts admin-only), races between actions, Idempotency-Key on
// create, keyset paging under inserts, tenant isolation, payments taken away (503) or paused (504)
// while a money step is under way — the order keeps its status, shows step_in_progress and refuses
// everything else until the step is settled, and never a double charge or refund — and TrackOrders
// watched over gRPC by `buf curl` (a client other than ours).
import { expect } from "chai";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import {
  ALICE,
  Api,
  BOB,
  CAROL,
  DEMO_CATALOG,
  MESH_PROCESSES,
  errorEnvelopeProblem,
  expectError,
  newKey,
  startE2eMesh,
  unique,
  type ApiResponse,
  type E2eMesh,
  type RequestOptions,
} from "../support/http.js";

const DEADLINE_MS = 1_500;
/** The orders reconciler's interval in this mesh: steps left unsettled by a 502/504 settle soon after their deadline. */
const RECONCILE_MS = 300;
/** How long a test waits for a step to settle once payments is back (deadline + interval, with room for a busy machine). */
const SETTLE_WAIT_MS = 30_000;
const BUF = fileURLToPath(new URL("../../node_modules/.bin/buf", import.meta.url));

const ORDER_KEYS = [
  "created_at",
  "currency",
  "discount_total",
  "discounts",
  "id",
  "items",
  "note",
  "payment_id",
  "refund_id",
  "shipments",
  "status",
  "step_in_progress",
  "subtotal",
  "total",
  "updated_at",
  "user_id",
];
const ITEM_KEYS = ["created_at", "id", "quantity", "sku", "unit_price"];
const DISCOUNT_KEYS = ["amount", "code", "created_at", "id"];
const SHIPMENT_KEYS = ["carrier", "created_at", "id", "order_id", "tracking_number"];
const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

/** An item as a client sends it: a catalog sku, and optionally the unit price it expects to pay. */
interface ItemIn {
  sku: string;
  quantity: number;
  unit_price?: number;
}
interface ItemJson {
  id: number;
  sku: string;
  quantity: number;
  unit_price: number;
  created_at: string;
}
interface DiscountJson {
  id: number;
  code: string;
  amount: number;
  created_at: string;
}
interface ShipmentJson {
  id: string;
  order_id: number;
  carrier: string | null;
  tracking_number: string | null;
  created_at: string;
}
interface OrderJson {
  id: number;
  user_id: number;
  status: "pending" | "paid" | "shipped" | "cancelled";
  currency: string;
  items: ItemJson[];
  discounts: DiscountJson[];
  subtotal: number;
  discount_total: number;
  total: number;
  note: string;
  payment_id: string | null;
  refund_id: string | null;
  shipments: ShipmentJson[];
  step_in_progress: "payment" | "cancellation" | null;
  created_at: string;
  updated_at: string;
}
interface PaymentJson {
  id: string;
  amount: number;
  currency: string;
  source: string;
  status: string;
  amount_refunded: number;
  user_id: number | null;
  reference: string | null;
}
interface RefundJson {
  id: string;
  payment_id: string;
  amount: number;
  currency: string;
}

interface Logged {
  method: string;
  path: string;
  res: ApiResponse;
  allow5xx: boolean;
}

/** The shared Api client, plus PATCH and a log of every answer for the envelope / no-5xx checks. */
class OrdersApi extends Api {
  readonly log: Logged[] = [];
  /** Set only inside the failure tests, where 502 and 504 are the point. */
  allow5xx = false;

  override async request(method: string, path: string, options: RequestOptions = {}): Promise<ApiResponse> {
    const res = await super.request(method, path, options);
    this.log.push({ method, path, res, allow5xx: this.allow5xx });
    return res;
  }

  patch(path: string, options?: RequestOptions) {
    return this.request("PATCH", path, options);
  }
}

/** The catalog's unit price of a demo sku (the only prices an order can hold in this mesh). */
function catalogPrice(sku: string): number {
  const price = DEMO_CATALOG[sku];
  if (price === undefined) throw new Error(`${sku} is not a demo catalog sku`);
  return price;
}

/** The items as the order must hold them: each at the catalog's price, whatever price was sent. */
const pricedAsCatalog = (items: readonly ItemIn[]) =>
  items.map(({ sku, quantity }) => ({ sku, quantity, unit_price: catalogPrice(sku) }));
const subtotalOf = (items: readonly ItemIn[]) => items.reduce((sum, i) => sum + i.quantity * catalogPrice(i.sku), 0);

/** Every `rel="next"` target of a Link header. */
function nextLink(res: ApiResponse): string | undefined {
  const header = res.headers.get("link");
  if (!header) return undefined;
  for (const part of header.split(",")) {
    const match = /^\s*<([^>]+)>\s*;(.*)$/.exec(part);
    if (match && /\brel="?next"?/.test(match[2] ?? "")) return match[1];
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// `buf curl` on a bidi stream: stdin is kept open for requests, stdout is a run of JSON documents
// (pretty-printed), split here by brace depth as they arrive.

interface TrackEvent {
  orderId: string;
  status: string;
  updateTime?: string;
}

class JsonStreamSplitter {
  private buffer = "";
  private depth = 0;
  private inString = false;
  private escaped = false;
  private start = -1;
  readonly values: unknown[] = [];

  push(chunk: string): void {
    const offset = this.buffer.length;
    this.buffer += chunk;
    for (let i = offset; i < this.buffer.length; i++) {
      const c = this.buffer[i];
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === "\\") this.escaped = true;
        else if (c === '"') this.inString = false;
        continue;
      }
      if (c === '"') this.inString = true;
      else if (c === "{") {
        if (this.depth === 0) this.start = i;
        this.depth++;
      } else if (c === "}") {
        this.depth--;
        if (this.depth === 0 && this.start >= 0) {
          this.values.push(JSON.parse(this.buffer.slice(this.start, i + 1)));
          this.start = -1;
        }
      }
    }
    if (this.depth === 0) this.buffer = "";
  }
}

interface BufStream {
  readonly child: ChildProcessWithoutNullStreams;
  send(message: unknown): void;
  events(): TrackEvent[];
  readonly stderr: () => string;
  waitFor(predicate: (events: TrackEvent[]) => boolean, what: string, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

const bufChildren = new Set<ChildProcessWithoutNullStreams>();

/** Kills the whole process group: node_modules/.bin/buf is a Node wrapper around the Go binary. */
function killGroup(child: ChildProcessWithoutNullStreams, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // already gone
  }
}

function openTrackOrders(port: number, token: string): BufStream {
  const child = spawn(
    BUF,
    [
      "curl",
      "--protocol",
      "grpc",
      "--http2-prior-knowledge",
      "-H",
      `authorization: Bearer ${token}`,
      "-d",
      "@-",
      `http://127.0.0.1:${port}/switchyard.orders.v1.OrderService/TrackOrders`,
    ],
    { detached: true, stdio: ["pipe", "pipe", "pipe"] },
  );
  bufChildren.add(child);
  const splitter = new JsonStreamSplitter();
  let out = "";
  let err = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    out += d;
    splitter.push(d);
  });
  child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
  child.stdin.on("error", () => {}); // a write after buf died is reported through its stderr instead
  const closed = new Promise<void>((resolve) => child.once("close", () => resolve()));
  // proto3 JSON leaves default values out: a missing status is ORDER_STATUS_UNSPECIFIED (0).
  const events = () =>
    (splitter.values as Partial<TrackEvent>[]).map((e) => ({
      ...e,
      orderId: e.orderId ?? "0",
      status: e.status ?? "ORDER_STATUS_UNSPECIFIED",
    }));
  return {
    child,
    send: (message) => child.stdin.write(`${JSON.stringify(message)}\n`),
    events,
    stderr: () => err,
    async waitFor(predicate, what, timeoutMs = 10_000) {
      const until = Date.now() + timeoutMs;
      while (!predicate(events()) && Date.now() < until && child.exitCode === null) await sleep(25);
      expect(
        predicate(events()),
        `${what}; buf stdout:\n${out.slice(-2_000)}\nbuf stderr:\n${err.slice(-2_000)}`,
      ).to.equal(true);
    },
    async close() {
      killGroup(child, "SIGTERM");
      const killer = setTimeout(() => killGroup(child, "SIGKILL"), 5_000);
      await closed;
      clearTimeout(killer);
      bufChildren.delete(child);
    },
  };
}

// ---------------------------------------------------------------------------------------------

describe("e2e: orders through the gateway", function () {
  this.timeout(30_000);

  let env: E2eMesh;
  let api: OrdersApi;
  let alice: string;
  let bob: string;
  let carol: string;
  let checkedUpTo = 0;

  before(async function () {
    this.timeout(120_000);
    env = await startE2eMesh("orders", {
      envFor: {
        gateway: { GATEWAY_DEADLINE_MS: String(DEADLINE_MS) },
        orders: { ORDERS_RECONCILE_INTERVAL_MS: String(RECONCILE_MS), GRPC_REFLECTION: "true" },
      },
    });
    api = new OrdersApi(env.mesh.gatewayUrl);
    [alice, bob, carol] = await Promise.all([api.login(ALICE), api.login(BOB), api.login(CAROL)]);
  });

  after(async function () {
    this.timeout(60_000);
    for (const child of bufChildren) killGroup(child, "SIGKILL");
    // A paused process would never see SIGTERM.
    for (const name of MESH_PROCESSES) {
      const child = env?.mesh.process(name);
      if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGCONT");
    }
    await env?.stop();
  });

  // Every answer of every test: a non-2xx is the JSON envelope {error, code} — plus `details`, of
  // exactly the documented keys and types, for PRICE_CHANGED, STEP_IN_PROGRESS, UNKNOWN_SKU and
  // CURRENCY_MISMATCH and for no other code — and nothing is 5xx outside the failure tests.
  afterEach(function () {
    const fresh = api?.log.slice(checkedUpTo) ?? [];
    checkedUpTo += fresh.length;
    if (this.currentTest?.state === "failed") return;
    for (const { method, path, res, allow5xx } of fresh) {
      const what = `${method} ${path} → ${res.status} ${res.text.slice(0, 300)}`;
      if (!allow5xx) expect(res.status, `no 5xx: ${what}`).to.be.below(500);
      if (res.status >= 200 && res.status < 300) continue;
      expect(res.headers.get("content-type") ?? "", `content-type of ${what}`).to.match(/^application\/json\b/);
      expect(res.json, what).to.be.an("object");
      expect(errorEnvelopeProblem(res.json), `envelope of ${what}`).to.equal(undefined);
      if (res.json.code === "STEP_IN_PROGRESS")
        expect(res.json.details.step, what).to.be.oneOf(["payment", "cancellation"]);
      if (res.json.code === "PRICE_CHANGED" || res.json.code === "CURRENCY_MISMATCH") {
        // The facts are the catalog's: its price and currency of the sku named.
        expect(res.json.details.currency, what).to.equal("EUR");
        if (res.json.code === "PRICE_CHANGED")
          expect(res.json.details.unit_price, what).to.equal(catalogPrice(res.json.details.sku));
      }
    }
  });

  // --- helpers -------------------------------------------------------------------------------

  async function createOrder(items: ItemIn[], options: { token?: string; note?: string } = {}): Promise<OrderJson> {
    const res = await api.post("/v1/orders", {
      token: options.token ?? alice,
      json: { currency: "EUR", items, ...(options.note === undefined ? {} : { note: options.note }) },
    });
    expect(res.status, res.text).to.equal(201);
    expect(res.headers.get("location")).to.equal(`/v1/orders/${res.json.id}`);
    return res.json as OrderJson;
  }

  async function getOrder(id: number, token = alice): Promise<OrderJson> {
    const res = await api.get(`/v1/orders/${id}`, { token });
    expect(res.status, res.text).to.equal(200);
    return res.json as OrderJson;
  }

  async function pay(id: number, token = alice): Promise<{ order: OrderJson; paymentPath: string }> {
    const res = await api.post(`/v1/orders/${id}/payment`, { token, json: { source: "tok_visa" } });
    expect(res.status, res.text).to.equal(201);
    const paymentPath = res.headers.get("location") ?? "";
    expect(paymentPath).to.match(/^\/v1\/payments\/pay_[A-Za-z0-9_-]+$/);
    return { order: res.json as OrderJson, paymentPath };
  }

  async function getPayment(paymentId: string, token = alice): Promise<PaymentJson> {
    const res = await api.get(`/v1/payments/${paymentId}`, { token });
    expect(res.status, res.text).to.equal(200);
    return res.json as PaymentJson;
  }

  async function refundsOf(paymentId: string, token = alice): Promise<RefundJson[]> {
    return (await api.listAll(`/v1/payments/${paymentId}/refunds`, token)) as RefundJson[];
  }

  /** Every payment made for the order (reference `order:<id>`), as an admin sees the tenant's payments. */
  async function paymentsOfOrder(orderId: number, token = alice): Promise<PaymentJson[]> {
    return ((await api.listAll("/v1/payments", token)) as PaymentJson[]).filter(
      (p) => p.reference === `order:${orderId}`,
    );
  }

  async function userOrders(userId: number, token: string): Promise<OrderJson[]> {
    return (await api.listAll(`/v1/users/${userId}/orders`, token)) as OrderJson[];
  }

  /** The order once no money step is under way (the reconciler settles one left by a 502/504), read until then. */
  async function settledOrder(id: number): Promise<OrderJson> {
    const until = Date.now() + SETTLE_WAIT_MS;
    let order = await getOrder(id);
    while (order.step_in_progress !== null && Date.now() < until) {
      await sleep(100);
      order = await getOrder(id);
    }
    expect(
      order.step_in_progress,
      `order ${id} still settling ${SETTLE_WAIT_MS} ms later: ${JSON.stringify(order)}`,
    ).to.equal(null);
    return order;
  }

  /**
   * The order as it was, apart from what recording a money step changes: step_in_progress (now the
   * step) and updated_at (not earlier than before).
   */
  function expectUnchangedBut(now: OrderJson, before: OrderJson, step: OrderJson["step_in_progress"]): void {
    expect({ ...now, updated_at: before.updated_at }, "the order as it was, with the step under way").to.deep.equal({
      ...before,
      step_in_progress: step,
    });
    expect(Date.parse(now.updated_at)).to.be.at.least(Date.parse(before.updated_at));
  }

  /**
   * The one charge an order that ended paid (or shipped, or cancelled after being paid) has: of its
   * total, for its owner, with reference `order:<id>` — and no other payment names the order.
   */
  async function expectOneCharge(order: OrderJson): Promise<PaymentJson> {
    const charges = await paymentsOfOrder(order.id);
    expect(
      charges.map((p) => p.id),
      `exactly one payment for order ${order.id}: ${JSON.stringify(charges)}`,
    ).to.deep.equal([order.payment_id]);
    expect(charges[0]).to.include({
      amount: order.total,
      currency: order.currency,
      user_id: order.user_id,
      reference: `order:${order.id}`,
    });
    return charges[0]!;
  }

  function expectOrderShape(order: OrderJson): void {
    expect(Object.keys(order).sort()).to.deep.equal(ORDER_KEYS);
    expect(order.id).to.be.a("number").and.satisfy(Number.isSafeInteger).and.above(0);
    expect(order.user_id).to.be.a("number").and.satisfy(Number.isSafeInteger).and.above(0);
    expect(order.created_at).to.match(ISO_TIME);
    expect(order.updated_at).to.match(ISO_TIME);
    for (const item of order.items) {
      expect(Object.keys(item).sort()).to.deep.equal(ITEM_KEYS);
      expect(item.id).to.be.a("number");
      expect(item.unit_price, `${item.sku} at the catalog's price`).to.equal(catalogPrice(item.sku));
    }
    for (const discount of order.discounts) {
      expect(Object.keys(discount).sort()).to.deep.equal(DISCOUNT_KEYS);
      expect(discount.id).to.be.a("number");
    }
    for (const shipment of order.shipments) expect(Object.keys(shipment).sort()).to.deep.equal(SHIPMENT_KEYS);
    expect(order.subtotal, "subtotal = Σ quantity × unit_price").to.equal(
      order.items.reduce((sum, i) => sum + i.quantity * i.unit_price, 0),
    );
    expect(order.discount_total, "discount_total = Σ discounts").to.equal(
      order.discounts.reduce((sum, d) => sum + d.amount, 0),
    );
    expect(order.total, "total = subtotal − discount_total").to.equal(order.subtotal - order.discount_total);
    // A step under way leaves the status as it was: pending while paid for, paid while refunded.
    expect(order.step_in_progress).to.be.oneOf([null, "payment", "cancellation"]);
    if (order.step_in_progress !== null)
      expect(order.status, JSON.stringify(order)).to.equal(order.step_in_progress === "payment" ? "pending" : "paid");
  }

  // --- contents and totals -------------------------------------------------------------------

  describe("contents and totals", () => {
    // One item without a price (the catalog's is taken), one with the catalog's own price.
    const ITEMS: ItemIn[] = [
      { sku: "BOOK-1", quantity: 2 },
      { sku: "PEN-1", quantity: 3, unit_price: 2_500 },
    ];
    let order: OrderJson;

    it("creates an order with items: 201 + Location, numeric ids, pending, priced from the catalog, totals computed by the service, no step", async () => {
      const res = await api.post("/v1/orders", {
        token: alice,
        json: { currency: "EUR", items: ITEMS, note: "first" },
      });
      expect(res.status, res.text).to.equal(201);
      order = res.json;
      expect(res.headers.get("location")).to.equal(`/v1/orders/${order.id}`);
      expect(res.headers.get("idempotent-replayed")).to.equal(null);
      expectOrderShape(order);
      expect(order).to.include({
        status: "pending",
        currency: "EUR",
        note: "first",
        subtotal: 10_500,
        discount_total: 0,
        total: 10_500,
        payment_id: null,
        refund_id: null,
        step_in_progress: null,
      });
      expect(order.items.map(({ sku, quantity, unit_price }) => ({ sku, quantity, unit_price }))).to.deep.equal([
        { sku: "BOOK-1", quantity: 2, unit_price: 1_500 },
        { sku: "PEN-1", quantity: 3, unit_price: 2_500 },
      ]);
      expect(order.discounts).to.deep.equal([]);
      expect(order.shipments).to.deep.equal([]);

      const got = await api.get(res.headers.get("location")!, { token: alice });
      expect(got.status, got.text).to.equal(200);
      expect(got.json).to.deep.equal(order);
    });

    it("adds an item and a discount (201 + Location, readable there), lists them, and recomputes the totals", async () => {
      const item = await api.post(`/v1/orders/${order.id}/items`, {
        token: alice,
        json: { sku: "MUG-1", quantity: 1, unit_price: 900 },
      });
      expect(item.status, item.text).to.equal(201);
      expect(Object.keys(item.json).sort()).to.deep.equal(ITEM_KEYS);
      expect(item.json).to.include({ sku: "MUG-1", quantity: 1, unit_price: 900 });
      expect(item.headers.get("location")).to.equal(`/v1/orders/${order.id}/items/${item.json.id}`);
      const itemAt = await api.get(item.headers.get("location")!, { token: alice });
      expect(itemAt.status, itemAt.text).to.equal(200);
      expect(itemAt.json).to.deep.equal(item.json);

      const discount = await api.post(`/v1/orders/${order.id}/discounts`, {
        token: alice,
        json: { code: "WELCOME", amount: 500 },
      });
      expect(discount.status, discount.text).to.equal(201);
      expect(Object.keys(discount.json).sort()).to.deep.equal(DISCOUNT_KEYS);
      expect(discount.json).to.include({ code: "WELCOME", amount: 500 });
      expect(discount.headers.get("location")).to.equal(`/v1/orders/${order.id}/discounts/${discount.json.id}`);
      const discountAt = await api.get(discount.headers.get("location")!, { token: alice });
      expect(discountAt.status, discountAt.text).to.equal(200);
      expect(discountAt.json).to.deep.equal(discount.json);

      const items = await api.get(`/v1/orders/${order.id}/items`, { token: alice });
      expect(items.status, items.text).to.equal(200);
      expect(items.json.next_cursor).to.equal(null);
      expect(items.json.items.map((i: ItemJson) => i.sku)).to.deep.equal(["BOOK-1", "PEN-1", "MUG-1"]);
      expect(items.json.items[2]).to.deep.equal(item.json);
      const discounts = await api.get(`/v1/orders/${order.id}/discounts`, { token: alice });
      expect(discounts.status, discounts.text).to.equal(200);
      expect(discounts.json).to.deep.equal({ items: [discount.json], next_cursor: null });

      const now = await getOrder(order.id);
      expectOrderShape(now);
      expect(now).to.include({
        status: "pending",
        subtotal: 11_400,
        discount_total: 500,
        total: 10_900,
        step_in_progress: null,
      });
      expect(now.items).to.deep.equal(items.json.items);
      expect(now.discounts).to.deep.equal([discount.json]);
      order = now;
    });

    it("refuses a quantity of 0 or below, a negative unit_price and a discount beyond the total with 422, changing nothing", async () => {
      const before = await userOrders(order.user_id, alice);
      for (const bad of [
        { sku: "BOOK-1", quantity: 0, unit_price: 1_500 },
        { sku: "BOOK-1", quantity: -1, unit_price: 1_500 },
        { sku: "BOOK-1", quantity: 0 },
        { sku: "BOOK-1", quantity: 1, unit_price: -1 },
      ]) {
        expectError(
          await api.post("/v1/orders", { token: alice, json: { currency: "EUR", items: [bad] } }),
          422,
          "RULE_VIOLATION",
        );
        expectError(await api.post(`/v1/orders/${order.id}/items`, { token: alice, json: bad }), 422, "RULE_VIOLATION");
      }
      const beyond = await api.post(`/v1/orders/${order.id}/discounts`, {
        token: alice,
        json: { code: "TOO-MUCH", amount: order.total + 1 },
      });
      expectError(beyond, 422, "RULE_VIOLATION");
      expectError(
        await api.post(`/v1/orders/${order.id}/discounts`, { token: alice, json: { code: "ZERO", amount: 0 } }),
        422,
        "RULE_VIOLATION",
      );

      expect(await getOrder(order.id)).to.deep.equal(order);
      expect(
        (await userOrders(order.user_id, alice)).map((o) => o.id),
        "no order was created",
      ).to.deep.equal(before.map((o) => o.id));
    });
  });

  // --- prices come from the catalog ------------------------------------------------------------

  describe("prices from the catalog", () => {
    it("the demo catalog is what these tests price against (GET /v1/catalog/items)", async () => {
      const catalog = await api.get("/v1/catalog/items?page_size=100");
      expect(catalog.status, catalog.text).to.equal(200);
      const prices = Object.fromEntries(
        (catalog.json.items as { sku: string; price: number; currency: string }[]).map((i) => [
          i.sku,
          [i.price, i.currency],
        ]),
      );
      expect(prices).to.deep.equal(
        Object.fromEntries(Object.entries(DEMO_CATALOG).map(([sku, price]) => [sku, [price, "EUR"]])),
      );
    });

    it("stores the catalog's price for every item, sent or not; the order's totals follow from it", async () => {
      const items: ItemIn[] = [
        { sku: "STICKER-1", quantity: 4 },
        { sku: "SHIRT-1", quantity: 1, unit_price: 1_900 },
        { sku: "MUG-1", quantity: 2 },
      ];
      const order = await createOrder(items, { note: `catalog-${unique()}` });
      expectOrderShape(order);
      expect(order.items.map(({ sku, quantity, unit_price }) => ({ sku, quantity, unit_price }))).to.deep.equal(
        pricedAsCatalog(items),
      );
      expect(order).to.include({
        subtotal: subtotalOf(items),
        total: 4 * 300 + 1_900 + 2 * 900,
        step_in_progress: null,
      });
      const added = await api.post(`/v1/orders/${order.id}/items`, {
        token: alice,
        json: { sku: "PEN-1", quantity: 2 },
      });
      expect(added.status, added.text).to.equal(201);
      expect(added.json).to.include({ sku: "PEN-1", quantity: 2, unit_price: 2_500 });
      expect(await getOrder(order.id)).to.include({
        subtotal: subtotalOf(items) + 5_000,
        total: subtotalOf(items) + 5_000,
      });
    });

    it("a unit_price other than the catalog's → 409 PRICE_CHANGED with the current price in details; nothing stored; sent again at that price → 201", async () => {
      const note = `price-changed-${unique()}`;
      const before = await userOrders((await createOrder([{ sku: "BOOK-1", quantity: 1 }])).user_id, alice);
      const body = {
        currency: "EUR",
        note,
        items: [
          { sku: "BOOK-1", quantity: 1 },
          { sku: "MUG-1", quantity: 2, unit_price: 850 },
        ],
      };
      const refused = await api.post("/v1/orders", { token: alice, json: body });
      expectError(refused, 409, "PRICE_CHANGED", { sku: "MUG-1", unit_price: 900, currency: "EUR" });
      // A price of 0 (free) is a price too: refused the same way.
      expectError(
        await api.post("/v1/orders", {
          token: alice,
          json: { ...body, items: [{ sku: "PEN-1", quantity: 1, unit_price: 0 }] },
        }),
        409,
        "PRICE_CHANGED",
        { sku: "PEN-1", unit_price: 2_500, currency: "EUR" },
      );
      expect(
        (await userOrders(before[0]!.user_id, alice)).map((o) => o.id),
        "no order was created",
      ).to.deep.equal(before.map((o) => o.id));

      // The client confirms the price it was told, and sends again.
      const confirmed = await api.post("/v1/orders", {
        token: alice,
        json: { ...body, items: [body.items[0], { ...body.items[1], unit_price: refused.json.details.unit_price }] },
      });
      expect(confirmed.status, confirmed.text).to.equal(201);
      expect(confirmed.json).to.include({ note, subtotal: 1_500 + 2 * 900 });

      // Adding an item: the same answer, and the order is untouched.
      const order = confirmed.json as OrderJson;
      const add = await api.post(`/v1/orders/${order.id}/items`, {
        token: alice,
        json: { sku: "PEN-1", quantity: 1, unit_price: 2_499 },
      });
      expectError(add, 409, "PRICE_CHANGED", { sku: "PEN-1", unit_price: 2_500, currency: "EUR" });
      expect(await getOrder(order.id)).to.deep.equal(order);
    });

    it("an unknown sku → 422 UNKNOWN_SKU naming it; a sku sold in another currency → 422 CURRENCY_MISMATCH; nothing stored", async () => {
      const note = `unknown-${unique()}`;
      const mine = await createOrder([{ sku: "BOOK-1", quantity: 1 }]);
      const before = await userOrders(mine.user_id, alice);
      const unknown = await api.post("/v1/orders", {
        token: alice,
        json: {
          currency: "EUR",
          note,
          items: [
            { sku: "BOOK-1", quantity: 1 },
            { sku: "NO-SUCH-SKU-1", quantity: 1 },
          ],
        },
      });
      expectError(unknown, 422, "UNKNOWN_SKU", { sku: "NO-SUCH-SKU-1" });
      expectError(
        await api.post("/v1/orders", {
          token: alice,
          json: { currency: "EUR", items: [{ sku: "NOPE-2", quantity: 1, unit_price: 1_500 }] },
        }),
        422,
        "UNKNOWN_SKU",
        { sku: "NOPE-2" },
      );
      const mismatch = await api.post("/v1/orders", {
        token: alice,
        json: { currency: "USD", note, items: [{ sku: "BOOK-1", quantity: 1 }] },
      });
      expectError(mismatch, 422, "CURRENCY_MISMATCH", { sku: "BOOK-1", currency: "EUR" });
      expect(
        (await userOrders(mine.user_id, alice)).map((o) => o.id),
        "no order was created",
      ).to.deep.equal(before.map((o) => o.id));

      expectError(
        await api.post(`/v1/orders/${mine.id}/items`, { token: alice, json: { sku: "NOPE-3", quantity: 1 } }),
        422,
        "UNKNOWN_SKU",
        { sku: "NOPE-3" },
      );
      // An order in dollars takes no euro item.
      const dollars = await api.post("/v1/orders", { token: alice, json: { currency: "USD" } });
      expect(dollars.status, dollars.text).to.equal(201);
      expect(dollars.json).to.include({ currency: "USD", subtotal: 0, total: 0, step_in_progress: null });
      expectError(
        await api.post(`/v1/orders/${dollars.json.id}/items`, { token: alice, json: { sku: "MUG-1", quantity: 1 } }),
        422,
        "CURRENCY_MISMATCH",
        { sku: "MUG-1", currency: "EUR" },
      );
      expect(await getOrder(mine.id)).to.deep.equal(mine);
      expect(await getOrder(dollars.json.id)).to.deep.equal(dollars.json);
    });
  });

  // --- the action resources --------------------------------------------------------------------

  describe("pay, ship, cancel", () => {
    let paid: OrderJson;

    it("pays: 201 + Location of the payment (amount = total, for the order's owner, reference order:<id>); paying again → 409 naming 'paid'; contents frozen (409)", async () => {
      const order = await createOrder([{ sku: "BOOK-1", quantity: 2, unit_price: 1_500 }]);
      const discount = await api.post(`/v1/orders/${order.id}/discounts`, {
        token: alice,
        json: { code: "WELCOME", amount: 500 },
      });
      expect(discount.status, discount.text).to.equal(201);

      const { order: body, paymentPath } = await pay(order.id);
      paid = body;
      expectOrderShape(paid);
      expect(paid).to.include({
        id: order.id,
        status: "paid",
        subtotal: 3_000,
        discount_total: 500,
        total: 2_500,
        payment_id: paymentPath.split("/").pop(),
        step_in_progress: null,
      });
      const payment = await api.get(paymentPath, { token: alice });
      expect(payment.status, payment.text).to.equal(200);
      expect(payment.json).to.include({
        id: paid.payment_id,
        amount: 2_500,
        currency: "EUR",
        source: "tok_visa",
        status: "succeeded",
        amount_refunded: 0,
        user_id: order.user_id,
        reference: `order:${order.id}`,
      });
      expect(await getOrder(order.id)).to.deep.equal(paid);

      const again = await api.post(`/v1/orders/${order.id}/payment`, { token: alice, json: { source: "tok_visa" } });
      expectError(again, 409, "INVALID_STATE");
      expect(again.json.error).to.match(/\bpaid\b/);

      const item = await api.post(`/v1/orders/${order.id}/items`, {
        token: alice,
        json: { sku: "PEN-1", quantity: 1 },
      });
      expectError(item, 409, "INVALID_STATE");
      expect(item.json.error).to.match(/\bpaid\b/);
      expectError(
        await api.post(`/v1/orders/${order.id}/discounts`, { token: alice, json: { code: "LATE", amount: 1 } }),
        409,
        "INVALID_STATE",
      );
      expect(await getOrder(order.id)).to.deep.equal(paid);
      await expectOneCharge(paid);
    });

    it("ships: 201 + Location (readable there); then cancel → 409 naming 'shipped'", async () => {
      const shipped = await api.post(`/v1/orders/${paid.id}/shipments`, {
        token: alice,
        json: { carrier: "DHL", tracking_number: "JJD000390007" },
      });
      expect(shipped.status, shipped.text).to.equal(201);
      expect(Object.keys(shipped.json).sort()).to.deep.equal(SHIPMENT_KEYS);
      expect(shipped.json).to.include({ order_id: paid.id, carrier: "DHL", tracking_number: "JJD000390007" });
      expect(shipped.json.id).to.be.a("string").and.not.equal("");
      expect(shipped.headers.get("location")).to.equal(`/v1/orders/${paid.id}/shipments/${shipped.json.id}`);
      const at = await api.get(shipped.headers.get("location")!, { token: alice });
      expect(at.status, at.text).to.equal(200);
      expect(at.json).to.deep.equal(shipped.json);
      const list = await api.get(`/v1/orders/${paid.id}/shipments`, { token: alice });
      expect(list.json).to.deep.equal({ items: [shipped.json], next_cursor: null });

      const order = await getOrder(paid.id);
      expect(order).to.include({
        status: "shipped",
        payment_id: paid.payment_id,
        refund_id: null,
        step_in_progress: null,
      });
      expect(order.shipments).to.deep.equal([shipped.json]);

      const cancel = await api.post(`/v1/orders/${paid.id}/cancel`, { token: alice });
      expectError(cancel, 409, "INVALID_STATE");
      expect(cancel.json.error).to.include("shipped");
      expectError(await api.post(`/v1/orders/${paid.id}/shipments`, { token: alice }), 409, "INVALID_STATE");
      expect(await getOrder(paid.id)).to.deep.equal(order);
      expect(await refundsOf(paid.payment_id!)).to.deep.equal([]);
    });

    it("cancels a paid order: 200, cancelled, refund_id set, the refund listed under its payment (amount = total), payment refunded", async () => {
      const order = await createOrder([{ sku: "SHIRT-1", quantity: 2 }]);
      const { order: paidOrder } = await pay(order.id);
      const paymentId = paidOrder.payment_id!;

      const cancelled = await api.post(`/v1/orders/${order.id}/cancel`, { token: alice });
      expect(cancelled.status, cancelled.text).to.equal(200);
      expectOrderShape(cancelled.json);
      expect(cancelled.json).to.include({
        id: order.id,
        status: "cancelled",
        payment_id: paymentId,
        total: 3_800,
        step_in_progress: null,
      });
      expect(cancelled.json.refund_id).to.be.a("string").and.match(/^re_/);
      expect(await getOrder(order.id)).to.deep.equal(cancelled.json);

      const refunds = await api.get(`/v1/payments/${paymentId}/refunds`, { token: alice });
      expect(refunds.status, refunds.text).to.equal(200);
      expect(
        refunds.json.items.map((r: RefundJson) => ({
          id: r.id,
          payment_id: r.payment_id,
          amount: r.amount,
          currency: r.currency,
        })),
      ).to.deep.equal([{ id: cancelled.json.refund_id, payment_id: paymentId, amount: 3_800, currency: "EUR" }]);
      expect(await getPayment(paymentId)).to.include({ status: "refunded", amount_refunded: 3_800 });

      const again = await api.post(`/v1/orders/${order.id}/cancel`, { token: alice });
      expectError(again, 409, "INVALID_STATE");
      expect(again.json.error).to.include("cancelled");
      expect(await refundsOf(paymentId), "still one refund").to.have.length(1);
      await expectOneCharge(cancelled.json);
    });

    it("cancels a paid order an admin had partly refunded: only the rest is refunded, the order cancelled", async () => {
      const order = await createOrder([{ sku: "PEN-1", quantity: 2 }]);
      const { order: paidOrder } = await pay(order.id);
      const paymentId = paidOrder.payment_id!;
      const partial = await api.post(`/v1/payments/${paymentId}/refunds`, {
        token: alice,
        key: newKey(),
        json: { amount: 1_000, reason: "scratched" },
      });
      expect(partial.status, partial.text).to.equal(201);

      const cancelled = await api.post(`/v1/orders/${order.id}/cancel`, { token: alice });
      expect(cancelled.status, cancelled.text).to.equal(200);
      expect(cancelled.json).to.include({ status: "cancelled", payment_id: paymentId, step_in_progress: null });
      const refunds = await refundsOf(paymentId);
      expect(
        refunds.map((r) => r.amount).sort((a, b) => a - b),
        "the admin's refund and the rest",
      ).to.deep.equal([1_000, 4_000]);
      expect(refunds.map((r) => r.id)).to.include(cancelled.json.refund_id);
      expect(await getPayment(paymentId)).to.include({ status: "refunded", amount_refunded: 5_000 });
    });

    it("cancels a pending order without a refund", async () => {
      const order = await createOrder([{ sku: "PEN-1", quantity: 1 }]);
      const cancelled = await api.post(`/v1/orders/${order.id}/cancel`, { token: alice });
      expect(cancelled.status, cancelled.text).to.equal(200);
      expect(cancelled.json).to.include({
        status: "cancelled",
        payment_id: null,
        refund_id: null,
        step_in_progress: null,
      });
      expectError(
        await api.post(`/v1/orders/${order.id}/payment`, { token: alice, json: { source: "tok_visa" } }),
        409,
        "INVALID_STATE",
      );
      expect(await paymentsOfOrder(order.id), "never charged").to.deep.equal([]);
    });
  });

  // --- who may do what ---------------------------------------------------------------------------

  describe("roles: a member acts on their own orders, an admin on every order of the tenant", () => {
    let aliceId: number;
    let bobId: number;
    let alicesOrder: OrderJson;
    let alicesPayment: PaymentJson;
    const secret = `alice-secret-${unique()}`;

    before(async () => {
      alicesOrder = await createOrder([{ sku: "STICKER-1", quantity: 3 }], { note: secret });
      aliceId = alicesOrder.user_id;
      alicesPayment = await getPayment(
        (await pay((await createOrder([{ sku: "MUG-1", quantity: 1 }])).id)).order.payment_id!,
      );
      bobId = (await createOrder([{ sku: "PEN-1", quantity: 1 }], { token: bob, note: "bob-roles" })).user_id;
      expect(bobId).to.not.equal(aliceId);
    });

    it("a member creates, reads, edits, pays and cancels their own order; the payment is theirs", async () => {
      const order = await createOrder([{ sku: "BOOK-1", quantity: 1 }], { token: bob });
      expect(order).to.include({ user_id: bobId, status: "pending", total: 1_500, step_in_progress: null });
      expect(await getOrder(order.id, bob)).to.deep.equal(order);
      const patched = await api.patch(`/v1/orders/${order.id}`, { token: bob, json: { note: "bob's own" } });
      expect(patched.status, patched.text).to.equal(200);
      const item = await api.post(`/v1/orders/${order.id}/items`, { token: bob, json: { sku: "MUG-1", quantity: 1 } });
      expect(item.status, item.text).to.equal(201);
      expect((await api.get(`/v1/orders/${order.id}/items`, { token: bob })).json.items).to.have.length(2);

      const { order: paidOrder, paymentPath } = await pay(order.id, bob);
      expect(paidOrder).to.include({ status: "paid", total: 2_400, note: "bob's own" });
      const payment = await api.get(paymentPath, { token: bob });
      expect(payment.status, payment.text).to.equal(200);
      expect(payment.json).to.include({
        amount: 2_400,
        user_id: bobId,
        reference: `order:${order.id}`,
        status: "succeeded",
      });
      const mine = (await api.listAll("/v1/payments", bob)) as PaymentJson[];
      expect(mine.map((p) => p.id))
        .to.include(payment.json.id)
        .and.not.include(alicesPayment.id);
      expect(
        mine.every((p) => p.user_id === bobId),
        "a member's list holds only their own payments",
      ).to.equal(true);

      // The orders workflow refunds for the member: no admin needed to cancel one's own paid order.
      const cancelled = await api.post(`/v1/orders/${order.id}/cancel`, { token: bob });
      expect(cancelled.status, cancelled.text).to.equal(200);
      expect(cancelled.json).to.include({ status: "cancelled", payment_id: payment.json.id });
      expect((await refundsOf(payment.json.id, bob)).map((r) => [r.id, r.amount])).to.deep.equal([
        [cancelled.json.refund_id, 2_400],
      ]);
      expect(await getPayment(payment.json.id, bob)).to.include({ status: "refunded", amount_refunded: 2_400 });
    });

    it("another user's order or payment is 404 for a member — reads and actions alike — and never its data", async () => {
      const before = await getOrder(alicesOrder.id);
      for (const res of [
        await api.get(`/v1/orders/${alicesOrder.id}`, { token: bob }),
        await api.get(`/v1/orders/${alicesOrder.id}/items`, { token: bob }),
        await api.get(`/v1/orders/${alicesOrder.id}/items/${alicesOrder.items[0]!.id}`, { token: bob }),
        await api.get(`/v1/orders/${alicesOrder.id}/discounts`, { token: bob }),
        await api.get(`/v1/orders/${alicesOrder.id}/shipments`, { token: bob }),
        await api.patch(`/v1/orders/${alicesOrder.id}`, { token: bob, json: { note: "mine now" } }),
        await api.post(`/v1/orders/${alicesOrder.id}/items`, { token: bob, json: { sku: "MUG-1", quantity: 1 } }),
        await api.post(`/v1/orders/${alicesOrder.id}/payment`, { token: bob, json: { source: "tok_visa" } }),
        await api.post(`/v1/orders/${alicesOrder.id}/cancel`, { token: bob }),
        await api.get(`/v1/payments/${alicesPayment.id}`, { token: bob }),
        await api.get(`/v1/payments/${alicesPayment.id}/refunds`, { token: bob }),
      ]) {
        expectError(res, 404, "NOT_FOUND");
        expect(res.text).not.to.include(secret);
        expect(res.text).not.to.include("STICKER-1");
      }
      expect(await getOrder(alicesOrder.id), "untouched").to.deep.equal(before);
      expect(await paymentsOfOrder(alicesOrder.id), "never charged").to.deep.equal([]);
    });

    it("refunds, shipments and discounts are admin-only: 403 ROLE_REQUIRED for a member, on their own order and payment too", async () => {
      const order = await createOrder([{ sku: "SHIRT-1", quantity: 1 }], { token: bob });
      expectError(
        await api.post(`/v1/orders/${order.id}/discounts`, { token: bob, json: { code: "SELF", amount: 100 } }),
        403,
        "ROLE_REQUIRED",
      );
      const { order: paidOrder } = await pay(order.id, bob);
      const shipment = await api.post(`/v1/orders/${order.id}/shipments`, { token: bob, json: { carrier: "DHL" } });
      expectError(shipment, 403, "ROLE_REQUIRED");
      const refund = await api.post(`/v1/payments/${paidOrder.payment_id}/refunds`, {
        token: bob,
        key: newKey(),
        json: { amount: 100 },
      });
      expectError(refund, 403, "ROLE_REQUIRED");
      // Also on someone else's: 403, the same answer as on one's own.
      expectError(
        await api.post(`/v1/payments/${alicesPayment.id}/refunds`, { token: bob, key: newKey(), json: { amount: 1 } }),
        403,
        "ROLE_REQUIRED",
      );
      expectError(
        await api.post(`/v1/orders/${alicesOrder.id}/discounts`, { token: bob, json: { code: "X", amount: 1 } }),
        403,
        "ROLE_REQUIRED",
      );
      expectError(await api.post(`/v1/orders/${alicesOrder.id}/shipments`, { token: bob }), 403, "ROLE_REQUIRED");
      expect(await getOrder(order.id, bob)).to.deep.equal(paidOrder);
      expect(await refundsOf(paidOrder.payment_id!, bob)).to.deep.equal([]);
      expect(await getPayment(paidOrder.payment_id!, bob)).to.include({ amount_refunded: 0, status: "succeeded" });
    });

    it("a member lists only their own orders (403 ROLE_REQUIRED for another user's list); an admin lists anyone's", async () => {
      const own = await userOrders(bobId, bob);
      expect(own.length).to.be.above(0);
      expect(own.every((o) => o.user_id === bobId)).to.equal(true);
      expectError(await api.get(`/v1/users/${aliceId}/orders`, { token: bob }), 403, "ROLE_REQUIRED");
      expectError(await api.get(`/v1/users/${aliceId}/orders?limit=1`, { token: bob }), 403, "ROLE_REQUIRED");
      expect((await userOrders(bobId, alice)).map((o) => o.id)).to.deep.equal(own.map((o) => o.id));
    });

    it("an admin acts on a member's order: discount, pay (the charge is the member's), ship; the member sees the payment", async () => {
      const order = await createOrder([{ sku: "BOOK-1", quantity: 2 }], { token: bob });
      const discount = await api.post(`/v1/orders/${order.id}/discounts`, {
        token: alice,
        json: { code: "STAFF", amount: 200 },
      });
      expect(discount.status, discount.text).to.equal(201);
      const { order: paidOrder } = await pay(order.id, alice);
      expect(paidOrder).to.include({ user_id: bobId, status: "paid", total: 2_800 });
      const payment = await expectOneCharge(paidOrder);
      expect(payment.user_id, "an order's payment belongs to the order's owner, whoever paid").to.equal(bobId);
      expect(await getPayment(payment.id, bob)).to.deep.equal(payment);
      expect(((await api.listAll("/v1/payments", bob)) as PaymentJson[]).map((p) => p.id)).to.include(payment.id);
      const shipped = await api.post(`/v1/orders/${order.id}/shipments`, { token: alice });
      expect(shipped.status, shipped.text).to.equal(201);
      expect(await getOrder(order.id, bob)).to.include({ status: "shipped", user_id: bobId });
    });

    it("an admin cancels a member's paid order: refunded in full", async () => {
      const order = await createOrder([{ sku: "MUG-1", quantity: 3 }], { token: bob });
      const { order: paidOrder } = await pay(order.id, bob);
      const cancelled = await api.post(`/v1/orders/${order.id}/cancel`, { token: alice });
      expect(cancelled.status, cancelled.text).to.equal(200);
      expect(cancelled.json).to.include({ status: "cancelled", user_id: bobId });
      expect((await refundsOf(paidOrder.payment_id!, bob)).map((r) => [r.id, r.amount])).to.deep.equal([
        [cancelled.json.refund_id, 2_700],
      ]);
    });
  });

  // --- PATCH and the absence of query actions --------------------------------------------------

  describe("PATCH and actions", () => {
    it("PATCH {status} → 422 naming the action resource /cancel, and nothing changes", async () => {
      const order = await createOrder([{ sku: "BOOK-1", quantity: 1 }], { note: "keep me" });
      for (const body of [{ status: "cancelled" }, { status: "cancelled", note: "sneaky" }, { status: "pending" }]) {
        const res = await api.patch(`/v1/orders/${order.id}`, { token: alice, json: body });
        expectError(res, 422, "RULE_VIOLATION");
        expect(res.json.error).to.include("/cancel");
      }
      expect(await getOrder(order.id)).to.deep.equal(order);
    });

    it("PATCH {note} → 200 with the note changed and the status unchanged (pending and paid)", async () => {
      const order = await createOrder([{ sku: "SHIRT-1", quantity: 1 }]);
      const patched = await api.patch(`/v1/orders/${order.id}`, { token: alice, json: { note: "leave at the door" } });
      expect(patched.status, patched.text).to.equal(200);
      expectOrderShape(patched.json);
      expect(patched.json).to.include({ id: order.id, status: "pending", note: "leave at the door", total: 1_900 });
      expect(await getOrder(order.id)).to.deep.equal(patched.json);

      await pay(order.id);
      const onPaid = await api.patch(`/v1/orders/${order.id}`, { token: alice, json: { note: "ring twice" } });
      expect(onPaid.status, onPaid.text).to.equal(200);
      expect(onPaid.json).to.include({ status: "paid", note: "ring twice" });
    });

    it("PATCH with an unknown field → 400", async () => {
      const order = await createOrder([{ sku: "BOOK-1", quantity: 1 }]);
      expectError(
        await api.patch(`/v1/orders/${order.id}`, { token: alice, json: { colour: "red" } }),
        400,
        "INVALID_REQUEST",
      );
      expectError(
        await api.patch(`/v1/orders/${order.id}`, { token: alice, json: { note: "x", action: "cancel" } }),
        400,
        "INVALID_REQUEST",
      );
      expectError(
        await api.patch(`/v1/orders/${order.id}`, { token: alice, json: { step_in_progress: null } }),
        400,
        "INVALID_REQUEST",
      );
      expect(await getOrder(order.id)).to.deep.equal(order);
    });

    it("no query parameter selects an action: POST /v1/orders/{id}?action=cancel → 404 or 405, the order unchanged", async () => {
      const order = await createOrder([{ sku: "MUG-1", quantity: 1 }]);
      for (const query of ["action=cancel", "status=cancelled", "_method=cancel"]) {
        const res = await api.post(`/v1/orders/${order.id}?${query}`, { token: alice });
        expect(res.status, res.text).to.be.oneOf([404, 405]);
        expectError(res, res.status, res.status === 404 ? "ROUTE_NOT_FOUND" : "METHOD_NOT_ALLOWED");
        const withBody = await api.post(`/v1/orders/${order.id}?${query}`, {
          token: alice,
          json: { status: "cancelled" },
        });
        expect(withBody.status, withBody.text).to.be.oneOf([404, 405]);
      }
      const read = await api.get(`/v1/orders/${order.id}?action=cancel`, { token: alice });
      expect(read.status, read.text).to.be.oneOf([200, 400]);
      expect(await getOrder(order.id), "still pending, not touched").to.deep.equal(order);
    });
  });

  // --- races ---------------------------------------------------------------------------------

  describe("concurrency through the gateway", () => {
    it("two concurrent cancels of one pending order: exactly one 200 and one 409", async () => {
      for (let round = 0; round < 3; round++) {
        const order = await createOrder([{ sku: "MUG-1", quantity: 1 + round }]);
        const answers = await Promise.all([
          api.post(`/v1/orders/${order.id}/cancel`, { token: alice }),
          api.post(`/v1/orders/${order.id}/cancel`, { token: alice }),
        ]);
        expect(answers.map((a) => a.status).sort(), answers.map((a) => a.text).join("\n")).to.deep.equal([200, 409]);
        const loser = answers.find((a) => a.status === 409)!;
        expectError(loser, 409, "INVALID_STATE");
        expect(loser.json.error).to.include("cancelled");
        const winner = answers.find((a) => a.status === 200)!;
        expect(winner.json).to.include({ status: "cancelled", refund_id: null });
        expect(await getOrder(order.id)).to.deep.equal(winner.json);
      }
    });

    it("concurrent ship + cancel of one paid order: exactly one success and one 409; the final state matches the winner", async () => {
      for (let round = 0; round < 3; round++) {
        const order = await createOrder([{ sku: "SHIRT-1", quantity: 1 + round }]);
        const amount = 1_900 * (1 + round);
        const { order: paidOrder } = await pay(order.id);
        const paymentId = paidOrder.payment_id!;
        const [ship, cancel] = await Promise.all([
          api.post(`/v1/orders/${order.id}/shipments`, { token: alice }),
          api.post(`/v1/orders/${order.id}/cancel`, { token: alice }),
        ]);
        const what = `ship ${ship.status} ${ship.text}\ncancel ${cancel.status} ${cancel.text}`;
        const shipWon = ship.status === 201;
        const cancelWon = cancel.status === 200;
        expect(shipWon !== cancelWon, `exactly one wins: ${what}`).to.equal(true);
        if (shipWon) {
          // A shipment is no money step: a cancel after it finds the order shipped.
          expectError(cancel, 409, "INVALID_STATE");
        } else {
          // A ship that came while the cancel's refund was under way is refused as such; after it, as the state.
          expect(ship.status, what).to.equal(409);
          expect(ship.json.code, what).to.be.oneOf(["INVALID_STATE", "STEP_IN_PROGRESS"]);
          expectError(
            ship,
            409,
            ship.json.code,
            ship.json.code === "STEP_IN_PROGRESS" ? { step: "cancellation" } : undefined,
          );
        }

        const final = await getOrder(order.id);
        const refunds = await refundsOf(paymentId);
        const payment = await getPayment(paymentId);
        if (shipWon) {
          expect(final).to.include({ status: "shipped", refund_id: null, step_in_progress: null });
          expect(final.shipments.map((s) => s.id)).to.deep.equal([ship.json.id]);
          expect(refunds, "no refund for a shipped order").to.deep.equal([]);
          expect(payment).to.include({ status: "succeeded", amount_refunded: 0 });
        } else {
          expect(final).to.deep.equal(cancel.json);
          expect(final).to.include({ status: "cancelled", step_in_progress: null });
          expect(final.shipments).to.deep.equal([]);
          expect(refunds.map((r) => [r.id, r.amount])).to.deep.equal([[final.refund_id, amount]]);
          expect(payment).to.include({ status: "refunded", amount_refunded: amount });
        }
        await expectOneCharge(final);
      }
    });

    it("two concurrent pays of one pending order: one 201 and one 409, and one charge", async () => {
      const order = await createOrder([{ sku: "BOOK-1", quantity: 3 }]);
      const answers = await Promise.all(
        [0, 1].map(() => api.post(`/v1/orders/${order.id}/payment`, { token: alice, json: { source: "tok_visa" } })),
      );
      expect(answers.map((a) => a.status).sort(), answers.map((a) => a.text).join("\n")).to.deep.equal([201, 409]);
      const loser = answers.find((a) => a.status === 409)!;
      // Refused while the winner's charge was under way, or after it, as paid.
      expect(loser.json.code, loser.text).to.be.oneOf(["INVALID_STATE", "STEP_IN_PROGRESS"]);
      expectError(
        loser,
        409,
        loser.json.code,
        loser.json.code === "STEP_IN_PROGRESS" ? { step: "payment" } : undefined,
      );
      const winner = answers.find((a) => a.status === 201)!;
      const final = await getOrder(order.id);
      expect(final).to.include({
        status: "paid",
        total: 4_500,
        payment_id: winner.headers.get("location")!.split("/").pop(),
        step_in_progress: null,
      });
      const charge = await expectOneCharge(final);
      expect(charge.amount_refunded, "the one charge stands").to.equal(0);
    });
  });

  // --- idempotency ---------------------------------------------------------------------------

  describe("Idempotency-Key on POST /v1/orders", () => {
    it("same key + same body → 200 replay with the same body and Location (Idempotent-Replayed: true), one order; other body → 422", async () => {
      const key = newKey();
      const note = `idem-${unique()}`;
      const body = { currency: "EUR", items: [{ sku: "BOOK-1", quantity: 1 }], note };
      const first = await api.post("/v1/orders", { token: alice, key, json: body });
      expect(first.status, first.text).to.equal(201);
      expect(first.headers.get("idempotent-replayed")).to.equal(null);

      const replay = await api.post("/v1/orders", { token: alice, key, json: body });
      expect(replay.status, replay.text).to.equal(200);
      expect(replay.headers.get("idempotent-replayed")).to.equal("true");
      expect(replay.headers.get("location")).to.equal(first.headers.get("location"));
      expect(replay.json).to.deep.equal(first.json);

      const other = await api.post("/v1/orders", {
        token: alice,
        key,
        json: { ...body, items: [{ sku: "BOOK-1", quantity: 2 }] },
      });
      expectError(other, 422, "IDEMPOTENCY_KEY_REUSED");

      // The first response again even after the order changed: the replay is the stored answer.
      expect(
        (await api.post(`/v1/orders/${first.json.id}/items`, { token: alice, json: { sku: "PEN-1", quantity: 1 } }))
          .status,
      ).to.equal(201);
      const later = await api.post("/v1/orders", { token: alice, key, json: body });
      expect(later.status, later.text).to.equal(200);
      expect(later.json).to.deep.equal(first.json);

      const mine = (await userOrders(first.json.user_id, alice)).filter((o) => o.note === note);
      expect(
        mine.map((o) => o.id),
        "one order in the user's list",
      ).to.deep.equal([first.json.id]);
    });

    it("keys are scoped to the tenant: carol's same key creates her own order", async () => {
      const key = newKey();
      const body = { currency: "EUR", items: [{ sku: "BOOK-1", quantity: 1 }] };
      const mine = await api.post("/v1/orders", { token: alice, key, json: body });
      expect(mine.status, mine.text).to.equal(201);
      const hers = await api.post("/v1/orders", { token: carol, key, json: body });
      expect(hers.status, hers.text).to.equal(201);
      expect(hers.json.id).not.to.equal(mine.json.id);
    });
  });

  // --- listing, paging, tenants --------------------------------------------------------------

  describe("GET /v1/users/{user_id}/orders", () => {
    let pager: string;
    let pagerId: number;
    let pagersBefore: OrderJson[];

    before(async () => {
      // The orders of a member made for this list alone, so that it is not disturbed by the other tests
      // (bob's orders are made throughout the file).
      const email = `pager-${unique()}@acme.test`;
      const created = await api.post("/v1/tenants/acme/users", {
        token: alice,
        json: { email, full_name: "Pager", password: "pager-password-1", role: "member" },
      });
      expect(created.status, created.text).to.equal(201);
      pager = await api.login({ tenant: "acme", email }, "pager-password-1");
      const first = await createOrder([{ sku: "PEN-1", quantity: 1 }], { token: pager, note: "pager-0" });
      pagerId = first.user_id;
      expect(pagerId).to.equal(created.json.id);
      for (let i = 1; i < 7; i++)
        await createOrder([{ sku: "PEN-1", quantity: 1 + i }], { token: pager, note: `pager-${i}` });
      pagersBefore = await userOrders(pagerId, pager);
    });

    it("pages with limit=2 through Link rel=next while orders are created between pages: no duplicate, no gap", async () => {
      expect(pagersBefore).to.have.length(7);
      expect(pagersBefore.map((o) => o.note)).to.deep.equal([
        "pager-6",
        "pager-5",
        "pager-4",
        "pager-3",
        "pager-2",
        "pager-1",
        "pager-0",
      ]);
      const seen: number[] = [];
      let path: string | undefined = `/v1/users/${pagerId}/orders?limit=2`;
      let pages = 0;
      while (path !== undefined) {
        expect(++pages, "pages").to.be.below(20);
        const res = await api.get(path, { token: pager });
        expect(res.status, res.text).to.equal(200);
        expect(Object.keys(res.json).sort()).to.deep.equal(["items", "next_cursor"]);
        expect(res.json.items.length).to.be.at.most(2);
        for (const o of res.json.items as OrderJson[]) {
          expectOrderShape(o);
          expect(o.user_id).to.equal(pagerId);
        }
        seen.push(...(res.json.items as OrderJson[]).map((o) => o.id));
        const link = nextLink(res);
        if (res.json.next_cursor === null) {
          expect(link, "no Link rel=next on the last page").to.equal(undefined);
        } else {
          expect(res.json.next_cursor).to.be.a("string").and.not.equal("");
          expect(link, `Link header: ${res.headers.get("link")}`).to.be.a("string");
          expect(new URL(link!, "http://x").searchParams.get("cursor")).to.equal(res.json.next_cursor);
          expect(new URL(link!, "http://x").pathname).to.equal(`/v1/users/${pagerId}/orders`);
        }
        path = link;
        // A newer order appears between pages: it must neither shift nor repeat what follows.
        await createOrder([{ sku: "PEN-1", quantity: 1 }], { token: pager, note: "pager-during" });
      }
      expect(new Set(seen).size, `no duplicate in ${seen.join(",")}`).to.equal(seen.length);
      const beforeIds = pagersBefore.map((o) => o.id);
      expect(
        seen.filter((id) => beforeIds.includes(id)),
        "every order that existed before, in order, none skipped",
      ).to.deep.equal(beforeIds);
      expect(pages).to.equal(4);
    });

    it("a malformed cursor or a cursor of another list → 400 INVALID_CURSOR", async () => {
      for (const cursor of ["not-a-cursor", "AAAA", "eyJ9"]) {
        expectError(
          await api.get(`/v1/users/${pagerId}/orders?cursor=${cursor}`, { token: pager }),
          400,
          "INVALID_CURSOR",
        );
      }
      const page = await api.get(`/v1/users/${pagerId}/orders?limit=1`, { token: pager });
      expect(page.json.next_cursor).to.be.a("string");
      const aliceId = (await createOrder([{ sku: "PEN-1", quantity: 1 }])).user_id;
      const foreign = await api.get(`/v1/users/${aliceId}/orders?cursor=${encodeURIComponent(page.json.next_cursor)}`, {
        token: alice,
      });
      expectError(foreign, 400, "INVALID_CURSOR");
      expectError(await api.get(`/v1/users/${pagerId}/orders?limit=0`, { token: pager }), 400, "INVALID_REQUEST");
    });

    it("another tenant's order is 404 and never its data (GET and actions with carol's globex token)", async () => {
      const secret = `secret-${unique()}`;
      const order = await createOrder([{ sku: "STICKER-1", quantity: 7 }], { note: secret });
      for (const res of [
        await api.get(`/v1/orders/${order.id}`, { token: carol }),
        await api.get(`/v1/orders/${order.id}/items`, { token: carol }),
        await api.patch(`/v1/orders/${order.id}`, { token: carol, json: { note: "mine now" } }),
        await api.post(`/v1/orders/${order.id}/cancel`, { token: carol }),
        await api.post(`/v1/orders/${order.id}/payment`, { token: carol, json: { source: "tok_visa" } }),
        await api.post(`/v1/orders/${order.id}/items`, { token: carol, json: { sku: "MUG-1", quantity: 1 } }),
        await api.post(`/v1/orders/${order.id}/discounts`, { token: carol, json: { code: "MINE", amount: 1 } }),
        await api.post(`/v1/orders/${order.id}/shipments`, { token: carol }),
      ]) {
        expectError(res, 404, "NOT_FOUND");
        expect(res.text).not.to.include(secret);
        expect(res.text).not.to.include("STICKER-1");
      }
      const list = await api.get(`/v1/users/${order.user_id}/orders`, { token: carol });
      expect(list.status, list.text).to.equal(200);
      expect(list.text).not.to.include(secret);
      expect((list.json.items as OrderJson[]).map((o) => o.id)).not.to.include(order.id);
      expect(await getOrder(order.id), "untouched").to.deep.equal(order);
    });
  });

  // --- TrackOrders over gRPC, watched by buf curl --------------------------------------------

  describe("TrackOrders (gRPC, buf curl with server reflection)", () => {
    it("streams PENDING, PAID, SHIPPED for a followed order while it is paid and shipped through the gateway; nothing of another tenant", async function () {
      const order = await createOrder([{ sku: "BOOK-1", quantity: 1 }]);
      const carolsOrder = await createOrder([{ sku: "BOOK-1", quantity: 2 }], { token: carol });
      const stream = openTrackOrders(env.mesh.ports.orders, alice);
      try {
        const ofOrder = (events: TrackEvent[]) => events.filter((e) => e.orderId === String(order.id));
        const ofCarols = (events: TrackEvent[]) => events.filter((e) => e.orderId === String(carolsOrder.id));
        stream.send({ follow_order_id: String(order.id) });
        await stream.waitFor((e) => ofOrder(e).length >= 1, "the current status on follow");
        // carol's order id, followed with alice's token: reported as unknown, and never followed.
        stream.send({ follow_order_id: String(carolsOrder.id) });
        await stream.waitFor((e) => ofCarols(e).length >= 1, "a report for a foreign order id");
        expect(ofCarols(stream.events()).map((e) => e.status)).to.deep.equal(["ORDER_STATUS_UNSPECIFIED"]);

        await pay(order.id);
        await pay(carolsOrder.id, carol);
        await stream.waitFor((e) => ofOrder(e).length >= 2, "PAID");
        const shipped = await api.post(`/v1/orders/${order.id}/shipments`, { token: alice });
        expect(shipped.status, shipped.text).to.equal(201);
        await stream.waitFor((e) => ofOrder(e).length >= 3, "SHIPPED");
        await sleep(200); // nothing more may follow

        const events = ofOrder(stream.events());
        expect(events.map((e) => e.status)).to.deep.equal([
          "ORDER_STATUS_PENDING",
          "ORDER_STATUS_PAID",
          "ORDER_STATUS_SHIPPED",
        ]);
        const times = events.map((e) => Date.parse(e.updateTime ?? ""));
        expect(times.every((t) => Number.isFinite(t))).to.equal(true);
        expect([...times].sort((a, b) => a - b)).to.deep.equal(times);
        expect(ofCarols(stream.events()), "no event of globex's order on acme's stream").to.have.length(1);
        expect(stream.stderr(), "buf reported no error").to.equal("");
      } finally {
        await stream.close();
      }
    });

    it("a member's stream reports another user's order as unknown and never follows it", async function () {
      const alicesOrder = await createOrder([{ sku: "MUG-1", quantity: 1 }]);
      const bobsOrder = await createOrder([{ sku: "MUG-1", quantity: 2 }], { token: bob });
      const stream = openTrackOrders(env.mesh.ports.orders, bob);
      try {
        const of = (id: number) => (events: TrackEvent[]) => events.filter((e) => e.orderId === String(id));
        stream.send({ follow_order_id: String(alicesOrder.id) });
        stream.send({ follow_order_id: String(bobsOrder.id) });
        await stream.waitFor(
          (e) => of(alicesOrder.id)(e).length >= 1 && of(bobsOrder.id)(e).length >= 1,
          "a report for each order followed",
        );
        await pay(alicesOrder.id);
        await pay(bobsOrder.id, bob);
        await stream.waitFor((e) => of(bobsOrder.id)(e).length >= 2, "bob's order PAID");
        await sleep(200);
        expect(
          of(alicesOrder.id)(stream.events()).map((e) => e.status),
          "alice's order: unknown to bob, never followed",
        ).to.deep.equal(["ORDER_STATUS_UNSPECIFIED"]);
        expect(of(bobsOrder.id)(stream.events()).map((e) => e.status)).to.deep.equal([
          "ORDER_STATUS_PENDING",
          "ORDER_STATUS_PAID",
        ]);
        expect(stream.stderr(), "buf reported no error").to.equal("");
      } finally {
        await stream.close();
      }
    });
  });

  // --- failures of real processes ------------------------------------------------------------

  describe("payments taken away (failure semantics)", () => {
    before(() => {
      api.allow5xx = true;
    });
    after(() => {
      api.allow5xx = false;
    });
    afterEach(() => {
      const payments = env.mesh.process("payments");
      if (payments.exitCode === null && payments.signalCode === null) payments.kill("SIGCONT");
    });

    /**
     * While a step is under way the order refuses every edit and action with 409 STEP_IN_PROGRESS
     * naming the step — and changes nothing.
     */
    async function expectStepRefusals(order: OrderJson, step: "payment" | "cancellation"): Promise<void> {
      const refusals = [
        await api.post(`/v1/orders/${order.id}/payment`, { token: alice, json: { source: "tok_visa" } }),
        await api.post(`/v1/orders/${order.id}/cancel`, { token: alice }),
        await api.patch(`/v1/orders/${order.id}`, { token: alice, json: { note: "while settling" } }),
        await api.post(`/v1/orders/${order.id}/shipments`, { token: alice }),
        await api.post(`/v1/orders/${order.id}/items`, { token: alice, json: { sku: "MUG-1", quantity: 1 } }),
        await api.post(`/v1/orders/${order.id}/discounts`, { token: alice, json: { code: "LATE", amount: 1 } }),
      ];
      for (const res of refusals) expectError(res, 409, "STEP_IN_PROGRESS", { step });
      expect(await getOrder(order.id), "nothing changed by the refused requests").to.deep.equal(order);
    }

    it("payments stopped: POST …/payment → 503 UPSTREAM_UNREACHABLE within the deadline; the charge was never sent, so the order is as it was, with no step under way; once payments is back a pay charges once", async function () {
      this.timeout(90_000);
      const order = await createOrder([
        { sku: "BOOK-1", quantity: 1 },
        { sku: "STICKER-1", quantity: 1 },
      ]);
      await env.mesh.stopService("payments");
      try {
        const res = await api.post(`/v1/orders/${order.id}/payment`, { token: alice, json: { source: "tok_visa" } });
        // Orders waited for payments within the call's deadline (less its margin to answer), then said so.
        expectError(res, 503, "UPSTREAM_UNREACHABLE");
        expect(res.headers.get("retry-after")).to.equal("1");
        expect(res.ms, `answered in ${res.ms.toFixed(0)} ms`).to.be.below(DEADLINE_MS);
        expect(res.text, "no internals in a 5xx").not.to.match(/ECONNREFUSED|127\.0\.0\.1|stack/i);
        // The charge was recorded as under way before payments was called; it never reached payments, so
        // orders settled it at once as nothing moved: the order is as it was, and accepts edits again.
        const during = await getOrder(order.id);
        expectOrderShape(during);
        expectUnchangedBut(during, order, null);
      } finally {
        await env.mesh.restartService("payments");
      }
      expect(
        await paymentsOfOrder(order.id),
        "nothing charged by the attempt that never reached payments",
      ).to.deep.equal([]);
      const again = await api.post(`/v1/orders/${order.id}/payment`, { token: alice, json: { source: "tok_visa" } });
      expect(again.status, again.text).to.equal(201);
      const final = await getOrder(order.id);
      expect(final).to.include({ status: "paid", total: 1_800, step_in_progress: null });
      await expectOneCharge(final);
    });

    it("payments paused: POST …/payment → 504 after about the deadline; the step stays under way while payments is paused; after SIGCONT it settles and the order ends paid with exactly one payment", async function () {
      this.timeout(90_000);
      const order = await createOrder([
        { sku: "SHIRT-1", quantity: 1 },
        { sku: "PEN-1", quantity: 1 },
      ]);
      expect(env.mesh.process("payments").kill("SIGSTOP")).to.equal(true);
      try {
        const res = await api.post(`/v1/orders/${order.id}/payment`, { token: alice, json: { source: "tok_visa" } });
        expectError(res, 504, "DEADLINE_EXCEEDED");
        expect(res.ms, `answered in ${res.ms.toFixed(0)} ms`).to.be.within(1_100, 4_000);
        // 504: the charge may or may not have happened. While payments is paused nobody knows, so the step
        // stays under way: the order is still pending and refuses a second pay (no double charge) and edits.
        const during = await getOrder(order.id);
        expectOrderShape(during);
        expectUnchangedBut(during, order, "payment");
        await expectStepRefusals(during, "payment");
      } finally {
        env.mesh.process("payments").kill("SIGCONT");
      }
      // Settled by asking payments under the step's key: either it charged (paid) or it never will (pending, pay again).
      const settled = await settledOrder(order.id);
      expect(settled.status, JSON.stringify(settled)).to.be.oneOf(["pending", "paid"]);
      if (settled.status === "pending") {
        expectUnchangedBut(settled, order, null);
        expect(await paymentsOfOrder(order.id), "nothing charged when the step settled as not charged").to.deep.equal(
          [],
        );
      }
      const retry = await api.post(`/v1/orders/${order.id}/payment`, { token: alice, json: { source: "tok_visa" } });
      if (settled.status === "paid") {
        expectError(retry, 409, "INVALID_STATE");
        expect(retry.json.error).to.match(/\bpaid\b/);
      } else {
        expect(retry.status, retry.text).to.equal(201);
      }
      const final = await getOrder(order.id);
      expect(final).to.include({ status: "paid", total: 4_400, step_in_progress: null });
      const charge = await expectOneCharge(final);
      expect(charge.amount_refunded).to.equal(0);
    });

    it("payments paused: cancel of a paid order → 504; the order stays paid with its cancellation under way; after SIGCONT it settles and the order ends cancelled with exactly one refund", async function () {
      this.timeout(90_000);
      const order = await createOrder([{ sku: "BOOK-1", quantity: 3 }]);
      const amount = 4_500;
      const { order: paidOrder } = await pay(order.id);
      const paymentId = paidOrder.payment_id!;
      expect(env.mesh.process("payments").kill("SIGSTOP")).to.equal(true);
      try {
        const res = await api.post(`/v1/orders/${order.id}/cancel`, { token: alice });
        expectError(res, 504, "DEADLINE_EXCEEDED");
        expect(res.ms, `answered in ${res.ms.toFixed(0)} ms`).to.be.within(1_100, 4_000);
        const during = await getOrder(order.id);
        expectOrderShape(during);
        expectUnchangedBut(during, paidOrder, "cancellation");
        await expectStepRefusals(during, "cancellation");
      } finally {
        env.mesh.process("payments").kill("SIGCONT");
      }
      // Refunded and cancelled, or (nothing refunded) paid as before — then a cancel is a new attempt.
      let final = await settledOrder(order.id);
      expect(final.status, JSON.stringify(final)).to.be.oneOf(["paid", "cancelled"]);
      if (final.status === "paid") {
        expectUnchangedBut(final, paidOrder, null);
        expect(await refundsOf(paymentId), "nothing refunded when the step settled as not refunded").to.deep.equal([]);
        const retry = await api.post(`/v1/orders/${order.id}/cancel`, { token: alice });
        expect(retry.status, retry.text).to.equal(200);
        final = retry.json;
      } else {
        expectError(await api.post(`/v1/orders/${order.id}/cancel`, { token: alice }), 409, "INVALID_STATE");
      }
      expect(final).to.include({ status: "cancelled", payment_id: paymentId, step_in_progress: null });
      expect(final.refund_id).to.be.a("string").and.match(/^re_/);
      expect(await getOrder(order.id)).to.deep.equal(final);
      const refunds = await refundsOf(paymentId);
      expect(
        refunds.map((r) => [r.id, r.amount]),
        "exactly one refund",
      ).to.deep.equal([[final.refund_id, amount]]);
      expect(await getPayment(paymentId)).to.include({ status: "refunded", amount_refunded: amount });
      await expectOneCharge(final);
    });
  });
});
