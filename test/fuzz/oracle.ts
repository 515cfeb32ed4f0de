// What the answer to a request must be, worked out from the OpenAPI document (and its stated check
// order: route 404/405 → request syntax 400/413/415 → authentication 401 → permission 403 → the
// resource 404/409/412/422; who may do what from each operation's `x-switchyard-access`; prices from
// the catalog) and from what the fuzz fixtures hold. The request is read from the bytes
// that are sent, the way a server must read them, never from how it was generated. Where the document
// leaves a choice open (a JSON body with duplicate names, a BOM, an integer written with leading
// zeros, an unusual media type), every reading it allows is accepted.
import { framingHeaders, type RawRequest } from "./raw-http.js";
import { problemsOf, readParam, type ApiModel, type OperationModel, type ParamModel } from "./openapi-model.js";

export type Holder = "alice" | "bob" | "carol";

export interface TenantFixtures {
  userIds: number[];
  /** userId: the payment's owner (null for a payment older than owners). */
  payments: { id: string; userId: number | null; refundIds: string[] }[];
  orders: {
    id: number;
    userId: number;
    status: "pending" | "paid" | "shipped" | "cancelled";
    currency: string;
    itemIds: number[];
    discountIds: number[];
    shipmentIds: string[];
  }[];
  docs: { id: string; etag: string }[];
  posts: string[];
  /** Sessions of the tenant's users (a session is readable by its own user only). */
  sessions: { id: string; userId: number }[];
}

/** The stored data the fuzzer knows about, and who may act on it. */
export interface World {
  tokens: Record<Holder, string>;
  holders: Record<Holder, { tenant: string; role: "admin" | "member"; userId: number }>;
  tenants: Record<string, TenantFixtures>;
  /** The public catalog by sku: what an order item is priced at, and in which currency. */
  catalog: ReadonlyMap<string, { price: number; currency: string }>;
  /** The tenant whose admins may write the catalog (CATALOG_OWNER_TENANT). */
  catalogOwner: string;
}

export interface Outcome {
  status: number;
  /** Accepted `code`s of the error body (any code of the document when absent). */
  codes?: readonly string[];
  /** The methods a 405 must list in Allow. */
  allow?: readonly string[];
  /** Answered by node's HTTP parser before the gateway sees the request (no rate-limit headers). */
  bare?: boolean;
  /** The error body's `details` (the codes that carry them), when the request settles what they are. */
  details?: Readonly<Record<string, string | number>>;
}

export interface Expectation {
  outcomes: Outcome[];
  /** Some reading of the request reaches a handler that would change stored data. */
  unsafe: boolean;
  /** A path, query or header parameter is malformed (or may be read so). */
  paramFault: boolean;
  /** The operation the request is routed to, if any. */
  operation: OperationModel | undefined;
  /** The request breaks HTTP itself: node answers it before the gateway sees it. */
  protocol: boolean;
}

/** Node's `--max-http-header-size` default: a larger header block is refused with 431. */
export const MAX_HEADER_BYTES = 16 * 1024;

const INVALID_REQUEST = ["INVALID_REQUEST"] as const;
const bad = (codes: readonly string[] = INVALID_REQUEST): Outcome => ({ status: 400, codes });
const malformedHttp: Outcome = { status: 400, codes: INVALID_REQUEST, bare: true };

// ---------------------------------------------------------------------------------------------
// Headers as node presents them to a server.

// node keeps the first of these when they are repeated (the rest are discarded).
const FIRST_WINS = new Set([
  "content-type",
  "content-length",
  "user-agent",
  "referer",
  "host",
  "authorization",
  "proxy-authorization",
  "if-modified-since",
  "if-unmodified-since",
  "from",
  "location",
  "max-forwards",
  "retry-after",
  "etag",
  "last-modified",
  "server",
  "age",
  "expires",
]);

export function nodeHeaders(lines: RawRequest["headers"]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [rawName, rawValue] of lines) {
    const name = rawName.toLowerCase();
    const value = (typeof rawValue === "string" ? rawValue : rawValue.toString("latin1")).replace(
      /^[ \t]+|[ \t]+$/g,
      "",
    );
    if (out[name] === undefined) out[name] = value;
    else if (!FIRST_WINS.has(name)) out[name] = `${out[name]}, ${value}`;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Media types (RFC 9110 §8.3.1): JSON is application/json or application/*+json, in UTF-8.

const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const MEDIA_TYPE = new RegExp(`^(${TOKEN})/(${TOKEN})((?:[ \\t]*;[ \\t]*${TOKEN}=(?:${TOKEN}|"[^"\\\\]*"))*)[ \\t]*$`);

export type MediaClass = "json" | "not-json" | "either" | "ndjson";

/** `ndjson`: the operation also takes application/x-ndjson (one JSON value per line), in UTF-8. */
export function mediaClass(contentType: string | undefined, ndjson = false): MediaClass {
  if (contentType === undefined) return "not-json";
  const m = MEDIA_TYPE.exec(contentType);
  if (!m) return /^\s*application\/([^;]*\+)?json\b/i.test(contentType) ? "either" : "not-json";
  const type = m[1]!.toLowerCase();
  const subtype = m[2]!.toLowerCase();
  if (type === "application" && subtype === "+json") return "either";
  const json = type === "application" && (subtype === "json" || /^[^+]+\+json$/.test(subtype));
  const lines = ndjson && type === "application" && subtype === "x-ndjson";
  if (!json && !lines) return "not-json";
  const params = [...m[3]!.matchAll(new RegExp(`(${TOKEN})=(${TOKEN}|"[^"\\\\]*")`, "g"))];
  const charsets = params
    .filter((p) => p[1]!.toLowerCase() === "charset")
    .map((p) => p[2]!.replace(/^"|"$/g, "").toLowerCase());
  const kind = lines ? "ndjson" : "json";
  if (charsets.length === 0) return kind;
  if (charsets.length > 1) return "either";
  return charsets[0] === "utf-8" ? kind : "not-json";
}

// ---------------------------------------------------------------------------------------------
// Routing.

function matchTemplate(op: OperationModel, segments: string[]): string[] | undefined {
  if (op.segments.length !== segments.length) return undefined;
  const values: string[] = [];
  for (let i = 0; i < segments.length; i++) {
    const t = op.segments[i]!;
    const s = segments[i]!;
    if (/^\{\w+\}$/.test(t)) {
      if (s === "") return undefined;
      values.push(s);
    } else if (t !== s) return undefined;
  }
  return values;
}

// ---------------------------------------------------------------------------------------------
// Cursors: "a malformed cursor or a cursor of another list → 400 INVALID_CURSOR".

const INVALID_CURSOR: Outcome = { status: 400, codes: ["INVALID_CURSOR"] };

function listOutcomes(cursor: unknown, collection: string, found: Outcome[] = [{ status: 200 }]): Outcome[] {
  if (cursor === undefined || cursor === "") return found;
  if (typeof cursor !== "string" || !/^[A-Za-z0-9_-]+$/.test(cursor)) return [INVALID_CURSOR];
  let body: unknown;
  try {
    body = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    return [INVALID_CURSOR];
  }
  // A cursor of this list that was forged (an odd position): a page, or refused as malformed.
  if (body && typeof body === "object" && (body as { c?: unknown }).c === collection) return [...found, INVALID_CURSOR];
  return [INVALID_CURSOR];
}

// ---------------------------------------------------------------------------------------------
// What the services answer a well-formed, authenticated request (holder undefined: no credential needed).

const NOT_FOUND: Outcome = { status: 404, codes: ["NOT_FOUND"] };
const RULE: Outcome = { status: 422, codes: ["RULE_VIOLATION"] };
const TENANT_MISMATCH: Outcome = { status: 403, codes: ["TENANT_MISMATCH"] };
const ROLE_REQUIRED: Outcome = { status: 403, codes: ["ROLE_REQUIRED"] };
const OK: Outcome = { status: 200 };

/** RFC 9110 §13.1.2 If-None-Match: weak comparison, or `*`. */
function noneMatchHits(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  const strip = (t: string) => t.trim().replace(/^W\//, "");
  return header.split(",").some((t) => t.trim() === "*" || strip(t) === strip(etag));
}

// Prices from the catalog ("Orders and money"): an item names a catalog sku; an unknown sku → 422
// UNKNOWN_SKU, a sku sold in another currency than the order's → 422 CURRENCY_MISMATCH, a unit_price
// that is not the catalog's → 409 PRICE_CHANGED — each with its details. The first item refused decides.

const CURRENCIES = new Set(Intl.supportedValuesOf("currency"));
// The service's rules on a note beyond the document's maxLength (in code points): at most 1000
// UTF-16 units, and no control character but tab and newline.
const NOTE_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f]/;
const NOTE_MAX_UNITS = 1_000;

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** The catalog's refusal of the first item it refuses; null when every item is priced; undefined when it cannot be told. */
function pricingRefusal(items: unknown, currency: string, catalog: World["catalog"]): Outcome | null | undefined {
  if (!Array.isArray(items)) return undefined;
  for (const item of items) {
    if (!isObject(item) || typeof item.sku !== "string") return undefined;
    const sku = item.sku;
    const entry = catalog.get(sku);
    if (!entry) return { status: 422, codes: ["UNKNOWN_SKU"], details: { sku } };
    if (entry.currency !== currency)
      return { status: 422, codes: ["CURRENCY_MISMATCH"], details: { sku, currency: entry.currency } };
    if (item.unit_price !== undefined && item.unit_price !== entry.price)
      return {
        status: 409,
        codes: ["PRICE_CHANGED"],
        details: { sku, unit_price: entry.price, currency: entry.currency },
      };
  }
  return null;
}

/** POST /v1/orders with a schema-valid body: the service's rules (422), then the catalog's; else it creates. */
function createOrderOutcomes(body: unknown, catalog: World["catalog"]): Outcome[] | "unsafe" {
  if (!isObject(body) || typeof body.currency !== "string") return "unsafe";
  const note = body.note ?? "";
  if (typeof note !== "string") return "unsafe";
  if (!CURRENCIES.has(body.currency) || note.length > NOTE_MAX_UNITS || NOTE_CONTROL.test(note)) return [RULE];
  const refusal = pricingRefusal(body.items ?? [], body.currency, catalog);
  return refusal ? [refusal] : "unsafe";
}

/** POST /v1/orders/{id}/items on an order the caller may act on: only while pending, then priced from the catalog. */
function addItemOutcomes(
  order: TenantFixtures["orders"][number],
  body: unknown,
  catalog: World["catalog"],
): Outcome[] | "unsafe" {
  // No fixture order has a money step under way (the fuzz run starts none: a pay never carries a credential).
  if (order.status !== "pending") return [{ status: 409, codes: ["INVALID_STATE"] }];
  if (body === undefined) return "unsafe";
  const refusal = pricingRefusal([body], order.currency, catalog);
  return refusal ? [refusal] : "unsafe";
}

/**
 * What the services answer a well-formed, authenticated request (holder undefined: no credential
 * needed). `body` is the request body as the gateway reads it, when that reading is certain.
 */
function upstream(
  op: OperationModel,
  p: Record<string, unknown>,
  world: World,
  holder: Holder | undefined,
  headers: Record<string, string>,
  body: unknown,
): Outcome[] | "unsafe" {
  if (op.operationId === "createSession") return [{ status: 401, codes: ["INVALID_CREDENTIALS"] }];
  if (op.operationId === "listCatalogItems") return [OK];
  if (!holder) throw new Error(`${op.operationId} needs a holder`);
  const me = world.holders[holder];
  const mine = world.tenants[me.tenant]!;
  const admin = me.role === "admin";
  // x-switchyard-access `owner`: the user the order or payment belongs to, or an admin of its tenant;
  // for anyone else it does not exist (404). `owner-admin`: admins only (403 ROLE_REQUIRED for members,
  // whatever the resource). `self-or-admin`: the user the path names, or an admin (403).
  // `tenant-own-items`: a member's list holds only their own items (another list, another cursor).
  const ownsOrAdmin = <T extends { userId: number | null }>(x: T | undefined): T | undefined =>
    x !== undefined && (admin || x.userId === me.userId) ? x : undefined;
  const payment = ownsOrAdmin(mine.payments.find((x) => x.id === p.payment_id));
  const order = ownsOrAdmin(mine.orders.find((x) => x.id === p.order_id));
  const doc = mine.docs.find((x) => x.id === p.doc_id);
  const ownTenant = p.tenant_id === me.tenant;
  const found = (yes: boolean, outcome: Outcome = OK) => (yes ? [outcome] : [NOT_FOUND]);
  if (op.access === "owner-admin" && !admin) return [ROLE_REQUIRED];
  if (op.access === "self-or-admin" && !admin && p.user_id !== me.userId) return [ROLE_REQUIRED];
  // `catalog-owner`: the catalog owner tenant's admins; another tenant's user 403 TENANT_MISMATCH, a member 403 ROLE_REQUIRED.
  if (op.access === "catalog-owner") {
    if (me.tenant !== world.catalogOwner) return [TENANT_MISMATCH];
    if (!admin) return [ROLE_REQUIRED];
  }
  switch (op.operationId) {
    case "listUsers":
      return ownTenant ? listOutcomes(p.cursor, `users:${me.tenant}`) : [TENANT_MISMATCH];
    case "getUser":
      return ownTenant ? found(mine.userIds.includes(p.user_id as number)) : [TENANT_MISMATCH];
    case "createUser":
      return !ownTenant ? [TENANT_MISMATCH] : me.role !== "admin" ? [ROLE_REQUIRED] : "unsafe";
    case "deleteUser":
      return !ownTenant
        ? [TENANT_MISMATCH]
        : me.role !== "admin"
          ? [ROLE_REQUIRED]
          : mine.userIds.includes(p.user_id as number)
            ? "unsafe"
            : [NOT_FOUND];
    case "listPayments":
      return listOutcomes(
        p.cursor,
        op.access === "tenant-own-items" && !admin ? `payments:${me.tenant}:${me.userId}` : `payments:${me.tenant}`,
      );
    case "getPayment":
      return found(payment !== undefined);
    case "createPayment":
    case "createDocument":
    case "createPost":
      return "unsafe";
    case "createOrder":
      return createOrderOutcomes(body, world.catalog);
    case "createRefund":
      return payment ? "unsafe" : [NOT_FOUND, RULE];
    case "listRefunds":
      if (payment) return listOutcomes(p.cursor, `refunds:${me.tenant}:${payment.id}`);
      return p.cursor === undefined ? [NOT_FOUND] : [NOT_FOUND, INVALID_CURSOR];
    case "getRefund":
      return found(payment !== undefined && payment.refundIds.includes(p.refund_id as string));
    case "getOrder":
    case "listShipments":
    case "listItems":
    case "listDiscounts":
      return found(order !== undefined);
    case "getShipment":
      return found(order !== undefined && order.shipmentIds.includes(String(p.shipment_id)));
    case "getItem":
      return found(order !== undefined && order.itemIds.includes(p.item_id as number));
    case "getDiscount":
      return found(order !== undefined && order.discountIds.includes(p.discount_id as number));
    case "cancelOrder":
      return order ? "unsafe" : [NOT_FOUND];
    case "addItem":
      return order ? addItemOutcomes(order, body, world.catalog) : [NOT_FOUND, RULE];
    case "updateOrder":
    case "payOrder":
    case "createShipment":
    case "addDiscount":
      return order ? "unsafe" : [NOT_FOUND, RULE];
    case "listUserOrders":
      return listOutcomes(p.cursor, `orders:${me.tenant}:${String(p.user_id)}`);
    case "getDocument":
      return doc ? [noneMatchHits(headers["if-none-match"], doc.etag) ? { status: 304 } : OK] : [NOT_FOUND];
    case "updateDocument": {
      if (!doc) return [NOT_FOUND, RULE];
      const ifMatch = p["if-match"];
      if (typeof ifMatch !== "string" || ifMatch === "") return "unsafe";
      const tags = ifMatch.split(",").map((t) => t.trim());
      return tags.includes("*") || tags.includes(doc.etag)
        ? "unsafe"
        : [{ status: 412, codes: ["ETAG_MISMATCH"] }, RULE];
    }
    case "listPosts": {
      if (/(^|,)\s*text\/event-stream\b/i.test(headers.accept ?? ""))
        return listOutcomes(p["last-event-id"], `posts:${me.tenant}`);
      return listOutcomes(p.cursor, `posts:${me.tenant}`);
    }
    case "getPost":
      return found(mine.posts.includes(p.post_id as string));
    case "getSession":
      return ownTenant
        ? found(mine.sessions.some((x) => x.id === p.session_id && x.userId === me.userId))
        : [TENANT_MISMATCH];
    case "createCatalogImport":
      return "unsafe";
    case "getCatalogImport":
      // The fuzz world holds no import job: every id names nothing (admins; members were refused above).
      return [NOT_FOUND];
    default:
      // An operation added to the document after this table was written: a read may answer anything
      // but a 5xx; anything else might store something, so it is only ever sent without a credential.
      return op.mutating ? "unsafe" : [OK, { status: 304 }, { status: 400 }, { status: 403 }, { status: 404 }];
  }
}

/** Operations whose answers the table above knows (the rest are checked more loosely). */
export const MODELLED_OPERATIONS = new Set([
  "getOpenApiDocument",
  "createSession",
  "getSession",
  "listCatalogItems",
  "listUsers",
  "getUser",
  "createUser",
  "deleteUser",
  "listPayments",
  "getPayment",
  "createPayment",
  "createOrder",
  "createDocument",
  "createPost",
  "createRefund",
  "listRefunds",
  "getRefund",
  "getOrder",
  "listShipments",
  "listItems",
  "listDiscounts",
  "getShipment",
  "getItem",
  "getDiscount",
  "cancelOrder",
  "updateOrder",
  "payOrder",
  "createShipment",
  "addItem",
  "addDiscount",
  "listUserOrders",
  "getDocument",
  "updateDocument",
  "listPosts",
  "getPost",
  "createCatalogImport",
  "getCatalogImport",
]);

// ---------------------------------------------------------------------------------------------
// The request body: size (413), media type (415), UTF-8 and JSON (400), schema (400 / 422).

export interface BodyFacts {
  /** The body text names a member twice (RFC 8259: the outcome is then unpredictable; refusing is fine). */
  duplicateKeys?: boolean;
}

/**
 * `value`: the body as the gateway reads it when it passes — undefined when there is no body, or
 * when more than one reading is allowed (repeated member names, a BOM) and they could differ.
 */
function bodyOutcomes(
  op: OperationModel,
  req: RawRequest,
  headers: Record<string, string>,
  maxBytes: number,
  facts: BodyFacts,
): { rejects: Outcome[]; passes: boolean; value?: unknown } {
  const framing = req.framing ?? "length";
  const sentBody = Number(headers["content-length"] ?? 0) > 0 || headers["transfer-encoding"] !== undefined;
  if (!op.body || !(op.body.required || sentBody)) return { rejects: [], passes: true };
  const tooLarge: Outcome = { status: 413, codes: ["PAYLOAD_TOO_LARGE"] };
  if (Number(headers["content-length"] ?? 0) > maxBytes) return { rejects: [tooLarge], passes: false };
  const rejects: Outcome[] = [];
  const media = mediaClass(headers["content-type"], op.body.ndjson);
  const unsupported: Outcome = { status: 415, codes: ["UNSUPPORTED_MEDIA_TYPE"] };
  if (media === "not-json") return { rejects: [unsupported], passes: false };
  if (media === "either") rejects.push(unsupported);
  let bytes = framing === "none" ? Buffer.alloc(0) : (req.body ?? Buffer.alloc(0));
  if (typeof framing === "object") {
    if (framing.declared > bytes.length)
      throw new Error("the fuzzer must not declare more body than it sends (the server would wait)");
    bytes = bytes.subarray(0, framing.declared);
  }
  if (bytes.length > maxBytes) return { rejects: [...rejects, tooLarge], passes: false };
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return { rejects: [...rejects, bad()], passes: false };
  }
  const readings = [text];
  // RFC 8259 §8.1: a parser MAY ignore a byte order mark rather than treat it as an error.
  if (text.startsWith("\uFEFF")) {
    if (media === "ndjson") readings.push(text.slice(1));
    else {
      rejects.push(bad());
      readings[0] = text.slice(1);
    }
  }
  // A body checked line by line: only the array itself is the request's (its elements are the job's).
  const { items: _items, ...arrayOnly } = op.body.schema;
  const wholeSchema = op.body.perLineItems ? arrayOnly : op.body.schema;
  let passes = false;
  const passing: unknown[] = [];
  for (const reading of readings) {
    let value: unknown;
    try {
      if (media === "ndjson") value = ndjsonValues(reading);
      else {
        if (reading.trim() === "") throw new Error("empty");
        value = JSON.parse(reading);
      }
    } catch {
      rejects.push(bad());
      continue;
    }
    const problems = problemsOf(wholeSchema, value);
    for (const status of problems) rejects.push(status === 400 ? bad() : RULE);
    if (problems.size === 0) {
      passes = true;
      passing.push(value);
    }
    if (facts.duplicateKeys) rejects.push(bad());
  }
  return { rejects, passes, ...(passing.length === 1 && !facts.duplicateKeys ? { value: passing[0] } : {}) };
}

/**
 * An NDJSON body (the document: one value per line, LF or CRLF, blank lines skipped) as the array of
 * its lines' values, a line that is no JSON holding its place as null. No line, or no JSON line: throws.
 */
function ndjsonValues(text: string): unknown[] {
  const values: unknown[] = [];
  let parsed = 0;
  for (const raw of text.split("\n")) {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (/^[ \t\r]*$/.test(line)) continue;
    try {
      values.push(JSON.parse(line));
      parsed++;
    } catch {
      values.push(null);
    }
  }
  if (parsed === 0) throw new Error("not NDJSON");
  return values;
}

// ---------------------------------------------------------------------------------------------

/**
 * The size node counts against its header limit lies between the header names and values alone
 * (what it counts) and the whole header block with the request line (what it might count).
 */
function headerBlockBytes(req: RawRequest): { least: number; most: number } {
  const target = Buffer.isBuffer(req.target) ? req.target.length : Buffer.byteLength(req.target, "latin1");
  let least = "Host127.0.0.1:65535Connectionclose".length;
  let most = req.method.length + target + 64;
  for (const [name, value] of [...req.headers, ...framingHeaders(req)]) {
    const length = typeof value === "string" ? Buffer.byteLength(value, "latin1") : value.length;
    least += name.length + length;
    most += name.length + length + 4;
  }
  return { least, most };
}

/** The holder whose token the Authorization header carries, or undefined. */
export function holderOf(world: World, authorization: string | undefined): Holder | undefined {
  if (authorization === undefined) return undefined;
  const m = /^Bearer ([A-Za-z0-9_\-.~+/]+=*)$/i.exec(authorization);
  if (!m) return undefined;
  return (Object.keys(world.tokens) as Holder[]).find((h) => world.tokens[h] === m[1]);
}

export function expectationOf(model: ApiModel, world: World, req: RawRequest, facts: BodyFacts = {}): Expectation {
  const none = (outcomes: Outcome[], protocol = false, operation?: OperationModel): Expectation => ({
    outcomes,
    unsafe: false,
    paramFault: false,
    operation,
    protocol,
  });
  const targetBytes = Buffer.isBuffer(req.target) ? req.target : Buffer.from(req.target, "latin1");
  // A request-target holds visible ASCII only (RFC 9112 §3.2): anything else is not HTTP.
  if (targetBytes.length === 0 || targetBytes.some((b) => b <= 0x20 || b >= 0x7f)) return none([malformedHttp], true);
  const size = headerBlockBytes(req);
  const tooLarge: Outcome = { status: 431, codes: INVALID_REQUEST, bare: true };
  if (size.least > MAX_HEADER_BYTES + 256) return none([tooLarge], true);
  const result = expectationWithinLimits(model, world, req, facts, targetBytes.toString("latin1"));
  if (size.most > MAX_HEADER_BYTES - 256) result.outcomes.push(tooLarge);
  return result;
}

function expectationWithinLimits(
  model: ApiModel,
  world: World,
  req: RawRequest,
  facts: BodyFacts,
  target: string,
): Expectation {
  const q = target.indexOf("?");
  const pathname = q === -1 ? target : target.slice(0, q);
  const search = q === -1 ? "" : target.slice(q + 1);
  if (pathname === "/healthz" || pathname === "/readyz")
    throw new Error("the fuzzer must not aim at the operational endpoints");
  const headers = nodeHeaders([...req.headers, ...framingHeaders(req)]);
  const segments = pathname.split("/");
  const matching = model.operations
    .map((op) => ({ op, values: matchTemplate(op, segments) }))
    .filter((m) => m.values !== undefined);
  const exp: Expectation = { outcomes: [], unsafe: false, paramFault: false, operation: undefined, protocol: false };
  if (matching.length === 0) {
    exp.outcomes.push({ status: 404, codes: ["ROUTE_NOT_FOUND"] });
    return exp;
  }
  const hit = matching.find((m) => m.op.method === req.method || (req.method === "HEAD" && m.op.method === "GET"));
  if (!hit) {
    const methods = new Set(matching.map((m) => m.op.method));
    if (methods.has("GET")) methods.add("HEAD");
    exp.outcomes.push({ status: 405, codes: ["METHOD_NOT_ALLOWED"], allow: [...methods] });
    return exp;
  }
  const op = hit.op;
  exp.operation = op;
  if (op.operationId === "getOpenApiDocument") {
    exp.outcomes.push(OK);
    return exp;
  }

  // Parameters: path (percent-decoded), query (first reading of each declared name), headers.
  const params: Record<string, unknown> = {};
  let paramBad: "no" | "maybe" | "yes" = "no";
  const worse = (v: "maybe" | "yes") => (paramBad = paramBad === "yes" || v === "yes" ? "yes" : "maybe");
  const consider = (param: ParamModel, text: string | undefined) => {
    if (text === undefined) {
      if (param.required) worse("yes");
      return;
    }
    const reading = readParam(param, text);
    if (reading.verdict === "bad") return worse("yes");
    if (reading.verdict === "either") worse("maybe");
    params[param.key] = reading.value;
  };
  op.pathParams.forEach((param, i) => {
    let decoded: string | undefined;
    try {
      decoded = decodeURIComponent(hit.values![i]!);
    } catch {
      worse("yes");
      return;
    }
    consider(param, decoded);
  });
  const query = new URLSearchParams(search);
  for (const param of op.queryParams) {
    const values = search ? query.getAll(param.name) : [];
    if (values.length > 1) worse("yes");
    else consider(param, values[0]);
  }
  for (const param of op.headerParams) consider(param, headers[param.key]);
  const paramCodes = op.headerParams.some((p) => p.key === "idempotency-key")
    ? ["INVALID_REQUEST", "IDEMPOTENCY_KEY_INVALID"]
    : INVALID_REQUEST;
  if (paramBad !== "no") {
    exp.paramFault = true;
    exp.outcomes.push(bad(paramCodes));
    if (paramBad === "yes") return exp;
  }

  const body = bodyOutcomes(op, req, headers, model.maxBodyBytes, facts);
  exp.outcomes.push(...body.rejects);
  // The document puts "well-typed values that break a rule → 422" after authentication, the gateway
  // checks the schema's rules before it: without a valid credential either answer is accepted.
  const anonymous = op.requiresAuth && !holderOf(world, headers.authorization);
  if (anonymous && body.rejects.some((o) => o.status === 422))
    exp.outcomes.push({ status: 401, codes: ["UNAUTHENTICATED"] });
  if (!body.passes) return exp;

  // X-Request-Timeout-Ms: "a malformed value → 400".
  const timeout = headers["x-request-timeout-ms"];
  if (timeout !== undefined && !(/^\d{1,9}$/.test(timeout) && Number(timeout) >= 1)) {
    exp.paramFault = true;
    exp.outcomes.push(bad());
    return exp;
  }

  let holder: Holder | undefined;
  if (op.requiresAuth) {
    holder = holderOf(world, headers.authorization);
    if (!holder) {
      exp.outcomes.push({ status: 401, codes: ["UNAUTHENTICATED"] });
      return exp;
    }
  }
  const answer = upstream(op, params, world, holder, headers, body.value);
  if (answer === "unsafe") exp.unsafe = true;
  else exp.outcomes.push(...answer);
  return exp;
}
