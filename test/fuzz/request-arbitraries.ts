// fast-check arbitraries of malformed and hostile requests, derived from the OpenAPI document: for
// every operation its path and query parameters, header parameters and request body schema give the
// valid values, and the hostile ones are made from them — a field dropped, retyped or set to a
// boundary value, a body that is not JSON, not UTF-8, nested 20 000 deep or one byte over the limit,
// a path segment that is badly percent-encoded or of the wrong type, a header that is garbage or huge.
//
// Every generated request carries what the answer must be (see oracle.ts), worked out from the bytes
// actually sent. A request that could change stored data if the gateway let it through (a valid create,
// a malformed id that a lenient parser might read as an existing one) never carries a valid
// credential: it is sent anonymously instead, so the fuzz run cannot change the data it checks.
import fc from "fast-check";
import { problemsOf, type ApiModel, type OperationModel, type ParamModel, type Schema } from "./openapi-model.js";
import {
  expectationOf,
  holderOf,
  nodeHeaders,
  type BodyFacts,
  type Expectation,
  type Holder,
  type Outcome,
  type World,
} from "./oracle.js";
import type { HeaderValue, RawRequest } from "./raw-http.js";

export interface FuzzRequest {
  readonly property: string;
  /** What was done to the request, for people reading a failure. */
  readonly what: string;
  readonly raw: RawRequest;
  readonly expectation: Expectation;
  [fc.toStringMethod](): string;
}

type Header = readonly [string, HeaderValue];

// ---------------------------------------------------------------------------------------------
// Text helpers.

/** Percent-encodes the UTF-8 bytes of everything but unreserved characters (and `keep`). */
export function pct(s: string, keep = ""): string {
  let out = "";
  for (const byte of Buffer.from(s, "utf8")) {
    const ch = String.fromCharCode(byte);
    out +=
      byte < 0x80 && (/[A-Za-z0-9\-._~]/.test(ch) || keep.includes(ch))
        ? ch
        : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");

function preview(bytes: Buffer | undefined, max = 160): string {
  if (!bytes) return "no body";
  const text = bytes
    .subarray(0, max)
    .toString("latin1")
    .replace(/[^\x20-\x7e]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
  return `${bytes.length} bytes ${JSON.stringify(text)}${bytes.length > max ? "…" : ""}`;
}

function describeRequest(r: { what: string; raw: RawRequest; expectation: Expectation }): string {
  const raw = r.raw;
  if (raw.raw)
    return `${r.what}: raw bytes ${preview(raw.raw, 300)} → expected ${describeOutcomes(r.expectation.outcomes)}`;
  const target = (Buffer.isBuffer(raw.target) ? raw.target.toString("latin1") : raw.target).slice(0, 300);
  const headers = raw.headers.map(([n, v]) => {
    const s = typeof v === "string" ? v : v.toString("latin1");
    return `${n}: ${JSON.stringify(s.length > 80 ? `${s.slice(0, 80)}…(${s.length})` : s)}`;
  });
  const framing =
    typeof raw.framing === "object" ? `Content-Length: ${raw.framing.declared}` : (raw.framing ?? "length");
  return `${r.what}: ${raw.method} ${target}${target.length >= 300 ? "…" : ""} [${headers.join("; ")}] body(${framing}) ${preview(raw.body)} → expected ${describeOutcomes(r.expectation.outcomes)}`;
}

export function describeOutcomes(outcomes: readonly Outcome[]): string {
  return [...new Set(outcomes.map((o) => `${o.status}${o.codes ? ` ${o.codes.join("|")}` : ""}`))].join(" or ");
}

// ---------------------------------------------------------------------------------------------
// JSON text with what JSON.stringify cannot write: raw number literals, repeated member names, and
// members named __proto__.

class RawJson {
  constructor(readonly text: string) {}
}
class Members {
  constructor(readonly entries: readonly (readonly [string, unknown])[]) {}
}

function toJson(v: unknown, facts: BodyFacts): string {
  if (v instanceof RawJson) return v.text;
  if (v instanceof Members) {
    const names = v.entries.map(([k]) => k);
    if (new Set(names).size !== names.length) facts.duplicateKeys = true;
    return `{${v.entries.map(([k, x]) => `${JSON.stringify(k)}:${toJson(x, facts)}`).join(",")}}`;
  }
  if (Array.isArray(v)) return `[${v.map((x) => toJson(x, facts)).join(",")}]`;
  if (v !== null && typeof v === "object") return toJson(new Members(Object.entries(v)), facts);
  return JSON.stringify(v) ?? "null";
}

const membersOf = (v: unknown): (readonly [string, unknown])[] =>
  v instanceof Members
    ? [...v.entries]
    : v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.entries(v)
      : [];

// ---------------------------------------------------------------------------------------------
// Valid values of a schema (the starting point of every mutation).

function typeOf(schema: Schema): string | undefined {
  return Array.isArray(schema.type) ? schema.type[0] : schema.type;
}

export function validValue(schema: Schema): fc.Arbitrary<unknown> {
  if (schema.enum) return fc.constantFrom(...schema.enum);
  switch (typeOf(schema)) {
    case "object": {
      const model: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [k, s] of Object.entries(schema.properties ?? {})) model[k] = validValue(s);
      return fc.record(model, { requiredKeys: [...(schema.required ?? [])] });
    }
    case "array":
      return fc.array(validValue(schema.items ?? {}), {
        minLength: schema.minItems ?? 0,
        maxLength: Math.min(schema.maxItems ?? 3, 3),
      });
    case "integer": {
      const min = schema.minimum ?? -1_000_000;
      const max = schema.maximum ?? 1_000_000;
      return fc.oneof(
        fc.integer({ min, max: Math.min(max, min + 5_000) }),
        fc.bigInt({ min: BigInt(min), max: BigInt(max) }).map(Number),
      );
    }
    case "number":
      return fc.double({
        min: schema.minimum ?? -1e9,
        max: schema.maximum ?? 1e9,
        noNaN: true,
        noDefaultInfinity: true,
      });
    case "boolean":
      return fc.boolean();
    case "null":
      return fc.constant(null);
    case "string": {
      const fine = (s: string) => problemsOf(schema, s).size === 0;
      if (schema.pattern) return fc.stringMatching(new RegExp(schema.pattern)).filter(fine);
      const minLength = schema.minLength ?? 0;
      const maxLength = Math.min(schema.maxLength ?? 40, Math.max(minLength, 40));
      return fc
        .oneof(
          fc.string({ unit: "grapheme-ascii", minLength, maxLength }),
          fc.string({ unit: "binary", minLength, maxLength }),
          fc.string({ unit: "grapheme", minLength, maxLength }),
        )
        .filter(fine);
    }
    default:
      return fc.constant(null);
  }
}

// ---------------------------------------------------------------------------------------------
// Hostile JSON values.

const NUMBER_LITERALS = [
  "1e308",
  "-1e308",
  "1e400",
  "-1e400",
  "-0",
  "-0.0",
  "0",
  "1",
  "-1",
  "18446744073709551616",
  "9007199254740993",
  "9007199254740992",
  "12345678901234567890",
  "1e2",
  "1E2",
  "1.5",
  "0.1",
  "1e-7",
  "1e-400",
  "100000000000",
  "100000000001",
  "10000",
  "10001",
  "5e-324",
  "1.7976931348623157e308",
  "-9223372036854775808",
  "1.0",
  "2.000000000000000001",
  "99999999999999999999999999999999999999",
  `1${"0".repeat(400)}`,
  `0.${"0".repeat(400)}1`,
];

const HOSTILE_STRINGS = [
  "",
  " ",
  "   ",
  "\u0000",
  "tok\u0000visa",
  "\t\r\n",
  "\u001b[31mred",
  "\u007f",
  "\ud800",
  "\udfff",
  "a\ud800b",
  "\udc00\ud800",
  "💳🔥",
  "👩‍👩‍👧‍👦",
  "\u202egnp.exe",
  "\u200b",
  "\ufeff",
  "\u2028\u2029",
  "\uffff",
  "\ufffe",
  "ﷺ",
  "E\u0301UR",
  "ＥＵＲ",
  "__proto__",
  "constructor",
  "prototype",
  "<script>alert(1)</script>",
  "' OR '1'='1' --",
  "'; DROP TABLE payments; --",
  "${jndi:ldap://x/a}",
  "{{7*7}}",
  "../../etc/passwd",
  "%00",
  "%s%n%x",
  "\\",
  '"',
  "null",
  "true",
  "0",
  "-1",
  "EUR",
  "eur",
  "XYZ",
  "EU",
  "EURO",
  "admin",
  "member",
  "Admin",
  "owner",
  "a@b.c",
  "no-at-sign",
  "@",
  "a@",
  "pay_AAAAAAAAAAAAAAAAAAAA",
];

function longStrings(schema: Schema): fc.Arbitrary<string> {
  const lengths = [1_000, 10_000, 60_000];
  if (schema.maxLength !== undefined) lengths.push(schema.maxLength, schema.maxLength + 1);
  if (schema.minLength !== undefined && schema.minLength > 0) lengths.push(schema.minLength - 1);
  return fc
    .tuple(fc.constantFrom(...lengths), fc.constantFrom("x", "é", "💳", " ", "\u0000", "\ud800"))
    .map(([n, ch]) => ch.repeat(Math.max(0, Math.floor(n / ch.length))));
}

const deepNest: fc.Arbitrary<RawJson> = fc
  .tuple(fc.integer({ min: 1_000, max: 20_000 }), fc.constantFrom("array", "object", "mixed"))
  .map(
    ([depth, kind]) =>
      new RawJson(
        kind === "array"
          ? `${"[".repeat(depth)}${"]".repeat(depth)}`
          : kind === "object"
            ? `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`
            : `${'[{"a":'.repeat(depth / 2)}null${"}]".repeat(depth / 2)}`,
      ),
  );

/** A value of a JSON type the schema does not allow. */
function otherType(schema: Schema): fc.Arbitrary<unknown> {
  const allowed = new Set(Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : []);
  const candidates: [string, fc.Arbitrary<unknown>][] = [
    ["string", fc.constantFrom("1", "", "true", "null", "[]")],
    ["integer", fc.constantFrom(0, 1, -1, 42)],
    ["number", fc.constantFrom(1.5, 0.1, -2.5, 1e-7).map((n) => new RawJson(String(n)))],
    ["boolean", fc.boolean()],
    ["null", fc.constant(null)],
    ["array", fc.constantFrom<unknown[]>([], [1], [null], [[]], ["x"])],
    ["object", fc.constantFrom<unknown>({}, { a: 1 }, { value: 1 }, new Members([["__proto__", { admin: true }]]))],
  ];
  // A non-integer number is of the wrong type for an integer; any number is right for a number.
  const usable = candidates.filter(([t]) => !allowed.has(t) && !(t === "integer" && allowed.has("number")));
  return fc.oneof(...usable.map(([, a]) => a));
}

function hostileValue(schema: Schema): fc.Arbitrary<unknown> {
  return fc.oneof(
    { arbitrary: fc.constantFrom(...NUMBER_LITERALS).map((t) => new RawJson(t)), weight: 3 },
    { arbitrary: fc.constantFrom(...HOSTILE_STRINGS), weight: 3 },
    { arbitrary: longStrings(schema), weight: 1 },
    { arbitrary: fc.string({ unit: "binary", maxLength: 300 }), weight: 1 },
    { arbitrary: fc.double().map((d) => new RawJson(Number.isFinite(d) ? String(d) : "1e999")), weight: 1 },
    { arbitrary: fc.bigInt({ min: -(2n ** 80n), max: 2n ** 80n }).map((n) => new RawJson(n.toString())), weight: 1 },
    { arbitrary: otherType(schema), weight: 2 },
    { arbitrary: deepNest, weight: 1 },
    { arbitrary: validValue(schema), weight: 1 },
  );
}

/** A value of the right type just past one of the schema's rules (→ 422), or just inside it. */
function boundaryValue(schema: Schema): fc.Arbitrary<unknown> {
  const options: fc.Arbitrary<unknown>[] = [];
  const t = typeOf(schema);
  if (t === "integer" || t === "number") {
    const edges: string[] = ["-1", "-9007199254740991", "9007199254740991"];
    if (schema.minimum !== undefined)
      edges.push(String(schema.minimum), String(schema.minimum - 1), String(schema.minimum - 1e9), "-0");
    if (schema.maximum !== undefined)
      edges.push(
        String(schema.maximum),
        String(schema.maximum + 1),
        "1e308",
        "18446744073709551616",
        "12345678901234567890",
        `${schema.maximum}0`,
      );
    options.push(fc.constantFrom(...edges).map((e) => new RawJson(e)));
  }
  if (t === "string") {
    const lengths = [0, 1];
    if (schema.minLength !== undefined) lengths.push(schema.minLength, Math.max(0, schema.minLength - 1));
    if (schema.maxLength !== undefined) lengths.push(schema.maxLength, schema.maxLength + 1, schema.maxLength * 2);
    options.push(
      fc
        .tuple(fc.constantFrom(...lengths), fc.constantFrom("a", "é", "💳", "\u0000", " ", "\ud800"))
        .map(([n, ch]) => ch.repeat(n)),
    );
    if (schema.pattern) {
      const re = new RegExp(schema.pattern, "u");
      options.push(
        fc
          .oneof(fc.constantFrom(...HOSTILE_STRINGS), fc.string({ unit: "grapheme", maxLength: 70 }))
          .filter((x) => !re.test(x)),
      );
    }
  }
  if (schema.enum) {
    const near = schema.enum.flatMap((e) =>
      typeof e === "string" ? [e.toUpperCase(), ` ${e}`, `${e}\u0000`, e.slice(1)] : [],
    );
    options.push(fc.constantFrom<unknown>("", "owner", "root", ...near));
  }
  return options.length > 0 ? fc.oneof(...options) : validValue(schema);
}

const UNKNOWN_NAMES = [
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "hasOwnProperty",
  "",
  " ",
  "extra",
  "AMOUNT",
  "amount ",
  "Amount",
  "amount\u0000",
  "id",
  "tenant_id",
  "role",
  "status",
  "user_id",
  "💳",
  "a".repeat(300),
  "$where",
  "a.b",
  "items[0]",
];

// ---------------------------------------------------------------------------------------------
// Bodies.

export interface BodySpec {
  label: string;
  bytes: Buffer | undefined;
  facts: BodyFacts;
  /** undefined: application/json; null: no Content-Type at all. */
  contentType?: string | null;
  framing?: RawRequest["framing"];
}

const jsonBody = (label: string, value: unknown): BodySpec => {
  const facts: BodyFacts = {};
  return { label, bytes: Buffer.from(toJson(value, facts), "utf8"), facts };
};

type Mutation = (value: unknown) => { value: unknown; label: string };

function labelOf(x: unknown): string {
  if (x instanceof RawJson) return x.text.length > 40 ? `${x.text.slice(0, 20)}…(${x.text.length} chars)` : x.text;
  if (typeof x === "string") return x.length > 40 ? `string of ${x.length} chars` : JSON.stringify(x);
  if (x instanceof Members) return `object with ${x.entries.map(([k]) => JSON.stringify(k)).join(",")}`;
  const s = JSON.stringify(x) ?? String(x);
  return s.length > 40 ? `${s.slice(0, 40)}…` : s;
}

function mutationArb(schema: Schema): fc.Arbitrary<Mutation> {
  const props = Object.keys(schema.properties ?? {});
  const required = schema.required ?? [];
  const propOf = (name: string): Schema => schema.properties?.[name] ?? {};
  const options: fc.WeightedArbitrary<Mutation>[] = [];
  const add = (weight: number, arbitrary: fc.Arbitrary<Mutation>) => options.push({ weight, arbitrary });
  if (required.length > 0) {
    add(
      1,
      fc.constantFrom(...required).map((name): Mutation => (v) => ({
        value: new Members(membersOf(v).filter(([k]) => k !== name)),
        label: `without required ${name}`,
      })),
    );
  }
  if (props.length > 0) {
    const set =
      (name: string, x: unknown): Mutation =>
      (v) => ({
        value: new Members([...membersOf(v).filter(([k]) => k !== name), [name, x]]),
        label: `${name} = ${labelOf(x)}`,
      });
    add(
      2,
      fc.constantFrom(...props).chain((name) => otherType(propOf(name)).map((x) => set(name, x))),
    );
    add(
      2,
      fc.constantFrom(...props).chain((name) => hostileValue(propOf(name)).map((x) => set(name, x))),
    );
    add(
      4,
      fc.constantFrom(...props).chain((name) => boundaryValue(propOf(name)).map((x) => set(name, x))),
    );
    // Repeated member names: {"amount": 1, "amount": "x"}.
    add(
      1,
      fc.constantFrom(...props).chain((name) =>
        fc
          .tuple(
            fc.oneof(validValue(propOf(name)), hostileValue(propOf(name))),
            fc.oneof(validValue(propOf(name)), hostileValue(propOf(name))),
          )
          .map(([a, b]): Mutation => (v) => ({
            value: new Members([...membersOf(v).filter(([k]) => k !== name), [name, a], [name, b]]),
            label: `${name} twice: ${labelOf(a)}, then ${labelOf(b)}`,
          })),
      ),
    );
    // A nested object (an order's items): mutate its first element.
    const nested = props.filter((p) => typeOf(propOf(p)) === "array" && typeOf(propOf(p).items ?? {}) === "object");
    if (nested.length > 0) {
      add(
        1,
        fc.constantFrom(...nested).chain((name) =>
          fc
            .tuple(validValue(propOf(name).items!), mutationArb(propOf(name).items!))
            .map(([first, inner]): Mutation => (v) => {
              const m = inner(first);
              return {
                value: new Members([...membersOf(v).filter(([k]) => k !== name), [name, [m.value]]]),
                label: `${name}[0]: ${m.label}`,
              };
            }),
        ),
      );
    }
  }
  add(
    1,
    fc
      .tuple(
        fc.constantFrom(...UNKNOWN_NAMES),
        fc.oneof(fc.constantFrom<unknown>(true, 1, "x", null, { admin: true }), deepNest),
      )
      .map(([name, x]): Mutation => (v) => ({
        value: new Members([[name, x], ...membersOf(v)]),
        label: `unknown member ${JSON.stringify(name.length > 20 ? `${name.slice(0, 20)}…` : name)}`,
      })),
  );
  // Not an object at all.
  add(
    1,
    fc
      .oneof(fc.constantFrom<unknown>([], "hello", 42, null, true, new RawJson("-0")), deepNest)
      .map((x): Mutation => () => ({ value: x, label: `body is ${labelOf(x)}` })),
  );
  add(
    1,
    fc.constant<Mutation>((v) => ({ value: [v], label: "the valid body inside an array" })),
  );
  return fc.oneof(...options);
}

/** A valid body with one or two things done to it. */
function mutatedBody(schema: Schema): fc.Arbitrary<BodySpec> {
  return fc
    .tuple(validValue(schema), fc.array(mutationArb(schema), { minLength: 1, maxLength: 2 }))
    .map(([valid, mutations]) => {
      let value: unknown = valid;
      const labels: string[] = [];
      for (const m of mutations) {
        const r = m(value);
        value = r.value;
        labels.push(r.label);
      }
      return jsonBody(`mutated body (${labels.join("; ")})`, value);
    });
}

const INVALID_UTF8 = [
  [0xff],
  [0xc3, 0x28],
  [0xe2, 0x82],
  [0xc0, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0x80],
  [0xfe, 0xff],
];

const INVALID_JSON = [
  "{",
  "}",
  '{"a"',
  "{'a': 1}",
  "{a: 1}",
  "[1,]",
  '{"a": 1,}',
  "NaN",
  "Infinity",
  "-Infinity",
  "undefined",
  '{"a": 01}',
  '{"a": 0x10}',
  '{"a": .5}',
  '{"a": +1}',
  '{"a": "\\x41"}',
  '{"a": "\\u12"}',
  '{"a": "tab\there"}',
  '{"a": "line\nbreak"}',
  "/* comment */ {}",
  "{} // comment",
  "{} {}",
  "{}x",
  "\u0000",
  '{"a":1}\u0000',
  '{"a":1]',
  "[}",
  '{"a" 1}',
  '{"a"::1}',
  "{,}",
  "tru",
  "nul",
  '"unterminated',
  '{"\\ud800": 1',
  "\u00a0{}",
];

function rawBody(schema: Schema, maxBytes: number): fc.Arbitrary<BodySpec> {
  const validText = validValue(schema).map((v) => JSON.stringify(v));
  const spec = (label: string, bytes: Buffer | undefined, extra: Partial<BodySpec> = {}): BodySpec => ({
    label,
    bytes,
    facts: {},
    ...extra,
  });
  return fc.oneof(
    fc.constantFrom(...INVALID_JSON).map((t) => spec(`invalid JSON ${JSON.stringify(t.slice(0, 30))}`, Buffer.from(t))),
    fc.string({ unit: "binary", maxLength: 200 }).map((t) => spec("random text", Buffer.from(t))),
    validText.chain((t) =>
      fc
        .integer({ min: 0, max: Math.max(0, t.length - 1) })
        .map((n) => spec(`valid JSON cut after ${n} of ${t.length} chars`, Buffer.from(t.slice(0, n)))),
    ),
    fc.tuple(validText, fc.constantFrom(...INVALID_UTF8), fc.nat()).map(([t, seq, at]) => {
      const bytes = Buffer.from(t);
      const i = bytes.length === 0 ? 0 : at % bytes.length;
      return spec(
        `invalid UTF-8 ${Buffer.from(seq).toString("hex")} at byte ${i}`,
        Buffer.concat([bytes.subarray(0, i), Buffer.from(seq), bytes.subarray(i)]),
      );
    }),
    fc
      .tuple(
        fc.oneof(validText, fc.constantFrom(...INVALID_JSON)),
        fc.constantFrom("utf-8 BOM", "two BOMs", "UTF-16LE", "UTF-16LE with BOM", "UTF-16BE with BOM", "UTF-32 BOM"),
      )
      .map(([t, how]) => {
        const bom = Buffer.from([0xef, 0xbb, 0xbf]);
        const le = Buffer.from(t, "utf16le");
        const be = Buffer.from(le).swap16();
        const bytes = {
          "utf-8 BOM": Buffer.concat([bom, Buffer.from(t)]),
          "two BOMs": Buffer.concat([bom, bom, Buffer.from(t)]),
          "UTF-16LE": le,
          "UTF-16LE with BOM": Buffer.concat([Buffer.from([0xff, 0xfe]), le]),
          "UTF-16BE with BOM": Buffer.concat([Buffer.from([0xfe, 0xff]), be]),
          "UTF-32 BOM": Buffer.concat([Buffer.from([0x00, 0x00, 0xfe, 0xff]), Buffer.from(t)]),
        }[how];
        return spec(`${how} body`, bytes);
      }),
    // Around the 64 KiB limit: exactly at it, one byte over, a little more; sent with a length or chunked.
    fc
      .tuple(
        fc.oneof(
          validText,
          mutatedBody(schema).map((b) => b.bytes!.toString("utf8")),
        ),
        fc.constantFrom(0, 1, 2, 100, 5_000),
        fc.constantFrom<"length" | "chunked">("length", "length", "chunked"),
      )
      .map(([t, over, framing]) => {
        const target = maxBytes + over;
        const base = Buffer.from(t);
        const bytes = base.length >= target ? base : Buffer.concat([base, Buffer.alloc(target - base.length, 0x20)]);
        return spec(`body of ${bytes.length} bytes (limit ${maxBytes}), ${framing}`, bytes, { framing });
      }),
    fc
      .constantFrom(maxBytes + 1, 1_000_000, 100_000_000, 2 ** 40)
      .map((declared) =>
        spec(`declared Content-Length ${declared}, 2 bytes sent`, Buffer.from("{}"), { framing: { declared } }),
      ),
    validText.map((t) =>
      spec("valid JSON with more bytes after the declared length", Buffer.from(`${t}garbage after the body`), {
        framing: { declared: Buffer.byteLength(t) },
      }),
    ),
    fc
      .constantFrom("", " ", "\r\n\t ", "null", "[]", '""', "1", "true", "{}", "[{}]", '"{}"')
      .map((t) => spec(`body ${JSON.stringify(t)}`, Buffer.from(t))),
    fc.constant(spec("no body at all (no Content-Length)", undefined, { framing: "none" })),
    fc.constant(spec("Content-Length: 0", Buffer.alloc(0))),
    validText.map((t) => spec("valid JSON followed by garbage", Buffer.from(`${t} x`))),
    validText.map((t) => spec("two JSON documents", Buffer.from(`${t}${t}`))),
    fc
      .integer({ min: 1_000, max: 60_000 })
      .map((n) => spec(`a number literal of ${n} digits`, Buffer.from(`{"amount":1${"0".repeat(n)}}`))),
    validText.chain((t) =>
      fc.nat().map((at) => {
        // A raw control character: never valid inside a JSON string, and not JSON whitespace.
        const i = t.length === 0 ? 0 : at % t.length;
        return spec(`raw U+0001 at ${i}`, Buffer.from(`${t.slice(0, i)}\u0001${t.slice(i)}`));
      }),
    ),
    deepNest.map((n) => spec(`a body nested ${Math.round(n.text.length / 2)} deep`, Buffer.from(n.text))),
  );
}

function bodyFor(
  op: OperationModel,
  maxBytes: number,
  weights: { valid: number; mutated: number; raw: number },
): fc.Arbitrary<BodySpec> {
  const schema = op.body!.schema;
  return fc.oneof(
    { arbitrary: validValue(schema).map((v) => jsonBody("schema-valid body", v)), weight: weights.valid },
    { arbitrary: mutatedBody(schema), weight: weights.mutated },
    { arbitrary: rawBody(schema, maxBytes), weight: weights.raw },
  );
}

// ---------------------------------------------------------------------------------------------
// Content types.

const CONTENT_TYPES: (string | null)[] = [
  null,
  "",
  "text/plain",
  "text/json",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x",
  "application/xml",
  "application/octet-stream",
  "application/json; charset=iso-8859-1",
  "application/json; charset=utf-16",
  "application/json; charset=utf8",
  "application/jsonp",
  "application/javascript",
  "*/*",
  "application/*",
  "json",
  "application/json, text/plain",
  "application/json;",
  "application/json ; charset=utf-8",
  "APPLICATION/JSON",
  "Application/Json; Charset=UTF-8",
  "application/json;charset=UTF-8",
  'application/json; charset="utf-8"',
  "application/problem+json",
  "application/merge-patch+json",
  "application/vnd.api+json",
  "application/+json",
  "application/json; charset=utf-8; charset=latin1",
  "application/json; foo=bar",
  "application/json\u00e9",
  "text/plain; charset=utf-8",
  "application/jsonx",
  "application/x-ndjson",
  "application/x-ndjson; charset=utf-8",
  "application/x-ndjson; charset=latin1",
  "application/ndjson",
];

// ---------------------------------------------------------------------------------------------
// Credentials.

type Auth =
  { kind: "valid"; holder: Holder } | { kind: "none" } | { kind: "garbage"; label: string; value: HeaderValue };

function garbageAuth(world: World): fc.Arbitrary<Auth> {
  const parts = (t: string) => t.split(".") as [string, string, string];
  const tokens = Object.values(world.tokens);
  const g = (label: string, value: HeaderValue): Auth => ({ kind: "garbage", label, value });
  const tampered = fc
    .tuple(
      fc.constantFrom(...tokens),
      fc.constantFrom(
        "signature byte",
        "alg none",
        "forged claims",
        "truncated",
        "one more char",
        "segments swapped",
        "HS256",
        "kid injection",
        "expired claims",
      ),
    )
    .map(([t, how]) => {
      const [h, p, s] = parts(t);
      const payload = JSON.parse(Buffer.from(p, "base64url").toString("utf8")) as Record<string, unknown>;
      const mid = Math.floor(s.length / 2);
      const value = {
        "signature byte": `${h}.${p}.${s.slice(0, mid)}${s[mid] === "A" ? "B" : "A"}${s.slice(mid + 1)}`,
        "alg none": `${b64url({ alg: "none", typ: "JWT" })}.${p}.`,
        "forged claims": `${h}.${b64url({ ...payload, role: "admin", tid: payload.tid === "acme" ? "globex" : "acme" })}.${s}`,
        truncated: t.slice(0, -7),
        "one more char": `${t}A`,
        "segments swapped": `${p}.${h}.${s}`,
        HS256: `${b64url({ alg: "HS256", typ: "JWT" })}.${p}.${Buffer.from("not-a-mac").toString("base64url")}`,
        "kid injection": `${b64url({ alg: "EdDSA", kid: "../../../../etc/passwd' OR '1'='1" })}.${p}.${s}`,
        "expired claims": `${h}.${b64url({ ...payload, exp: 1, iat: 0 })}.${s}`,
      }[how];
      return g(`token with ${how}`, `Bearer ${value}`);
    });
  return fc.oneof(
    { arbitrary: tampered, weight: 4 },
    {
      arbitrary: fc.constantFrom(
        g("empty Authorization", ""),
        g("scheme only", "Bearer"),
        g("scheme and space", "Bearer "),
        g("Basic credentials", `Basic ${Buffer.from("alice@acme.test:demo-password").toString("base64")}`),
        g("Digest", 'Digest username="alice", realm="x", nonce="1", uri="/", response="0"'),
        g("Bearer null", "Bearer null"),
        g("Bearer undefined", "Bearer undefined"),
        g("three empty segments", "Bearer .."),
        g("a.b.c", "Bearer a.b.c"),
        g("token without scheme", tokens[0]!),
        g("Token scheme", `Token ${tokens[0]!}`),
        g("two tokens", `Bearer ${tokens[0]!} ${tokens[1]!}`),
        g("tab instead of space", `Bearer\t${tokens[0]!}`),
        g("token with a star", `Bearer ${tokens[0]!.slice(0, 10)}*${tokens[0]!.slice(10)}`),
        g("Cyrillic bytes", Buffer.from("Bearer тест", "utf8")),
        g("latin-1 bytes", Buffer.from([0x42, 0x65, 0x61, 0x72, 0x65, 0x72, 0x20, 0xe9, 0xff, 0xa0])),
      ),
      weight: 3,
    },
    {
      arbitrary: fc.stringMatching(/^[A-Za-z0-9_.~+/-]{1,300}$/).map((s) => g("random token", `Bearer ${s}`)),
      weight: 2,
    },
    {
      arbitrary: fc
        .integer({ min: 1_000, max: 12_000 })
        .map((n) => g(`token of ${n} chars`, `Bearer ${"A".repeat(n)}`)),
      weight: 1,
    },
  );
}

function authArb(world: World, weights = { valid: 5, none: 2, garbage: 3 }): fc.Arbitrary<Auth> {
  return fc.oneof(
    {
      arbitrary: fc.constantFrom<Holder>("alice", "bob", "carol").map((holder): Auth => ({ kind: "valid", holder })),
      weight: weights.valid,
    },
    { arbitrary: fc.constant<Auth>({ kind: "none" }), weight: weights.none },
    { arbitrary: garbageAuth(world), weight: weights.garbage },
  );
}

function authHeader(world: World, auth: Auth): Header[] {
  if (auth.kind === "valid") return [["Authorization", `Bearer ${world.tokens[auth.holder]}`]];
  if (auth.kind === "garbage") return [["Authorization", auth.value]];
  return [];
}

const authLabel = (a: Auth) =>
  a.kind === "valid" ? `as ${a.holder}` : a.kind === "none" ? "anonymous" : `with ${a.label}`;

// ---------------------------------------------------------------------------------------------
// Path and query parameters.

function fixtureValues(world: World, name: string): string[] {
  const t = Object.values(world.tenants);
  switch (name) {
    case "tenant_id":
      return Object.keys(world.tenants);
    case "user_id":
      return t.flatMap((x) => x.userIds.map(String));
    case "payment_id":
      return t.flatMap((x) => x.payments.map((p) => p.id));
    case "refund_id":
      return t.flatMap((x) => x.payments.flatMap((p) => p.refundIds));
    case "order_id":
      return t.flatMap((x) => x.orders.map((o) => String(o.id)));
    case "item_id":
      return t.flatMap((x) => x.orders.flatMap((o) => o.itemIds.map(String)));
    case "discount_id":
      return t.flatMap((x) => x.orders.flatMap((o) => o.discountIds.map(String)));
    case "shipment_id":
      return t.flatMap((x) => x.orders.flatMap((o) => o.shipmentIds));
    case "doc_id":
      return t.flatMap((x) => x.docs.map((d) => d.id));
    case "post_id":
      return t.flatMap((x) => x.posts);
    case "session_id":
      return t.flatMap((x) => x.sessions.map((s) => s.id));
    default:
      return [];
  }
}

const PREFIX: Record<string, string> = {
  payment_id: "pay_",
  refund_id: "re_",
  doc_id: "doc_",
  post_id: "post_",
  shipment_id: "shp_",
  session_id: "ses_",
};

/** A well-formed value: an existing fixture (any tenant's) or one that names nothing. */
function wellFormedParam(world: World, param: ParamModel): fc.Arbitrary<string> {
  const fixtures = fixtureValues(world, param.name);
  const absent: fc.Arbitrary<string> =
    param.schema.type === "integer"
      ? fc.oneof(
          fc.integer({ min: 100_000, max: 2_000_000_000 }).map(String),
          fc.constant(String(param.schema.maximum ?? 9007199254740991)),
        )
      : param.name === "tenant_id"
        ? fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,20}$/).filter((s) => !fixtures.includes(s))
        : PREFIX[param.name]
          ? fc.stringMatching(/^[A-Za-z0-9_-]{20}$/).map((s) => `${PREFIX[param.name]}${s}`)
          : validValue(param.schema).map((v) => pct(String(v)));
  return fixtures.length > 0
    ? fc.oneof({ arbitrary: fc.constantFrom(...fixtures), weight: 3 }, { arbitrary: absent, weight: 1 })
    : absent;
}

const HOSTILE_INTEGER_TEXTS = [
  "0",
  "-1",
  "-0",
  "1.5",
  "1e400",
  "abc",
  "0x1",
  "0x10",
  "+1",
  "%201",
  "1%20",
  "%2B1",
  "%091",
  "1%0A",
  "1e3",
  "1E2",
  "1.0",
  "01",
  "007",
  "Infinity",
  "-Infinity",
  "NaN",
  "9007199254740992",
  "9007199254740993",
  "99999999999999999999999",
  "1_000",
  "%31",
  "%EF%BC%91",
  "1;2",
  "1,2",
  "%5B1%5D",
  "null",
  "true",
  "0b1",
  "0o7",
  ".5",
  "5.",
  "1e-7",
  "-9007199254740991",
  "%00",
  "1%00",
  "..",
  ".",
  "1%2F2",
  "%D9%A1",
];

const BAD_PERCENT = [
  "%",
  "%Z",
  "%ZZ",
  "%E0%A4%A",
  "%C0%AF",
  "%ED%A0%80",
  "%FF",
  "%F0%9F%92",
  "abc%",
  "%%",
  "%u0041",
  "%2",
  "%0",
];

/** A path segment that breaks the parameter's schema (or is at least hostile). */
function hostileParam(param: ParamModel): fc.Arbitrary<string> {
  const schema = param.schema;
  const common = fc.oneof(
    fc.constantFrom(...BAD_PERCENT),
    fc.constantFrom(
      ".",
      "..",
      "%2E%2E",
      "%2e",
      "%2F",
      "a%2Fb",
      "%00",
      "%20",
      "%3F",
      "%23",
      "*",
      "~",
      "__proto__",
      "constructor",
      "%F0%9F%92%B3",
      "'",
      "(",
      ")",
      "!",
      "$",
      "&",
      "+",
      ",",
      ";",
      "=",
      "@",
      ":",
      "[",
      "]",
      "{",
      "}",
      "|",
      "\\",
      "^",
      "`",
      '"',
      "<",
      ">",
      "#",
    ),
    fc.constantFrom(...HOSTILE_STRINGS).map((s) => pct(s)),
    fc.string({ unit: "binary", minLength: 1, maxLength: 80 }).map((s) => pct(s)),
  );
  const lengths = fc
    .tuple(fc.constantFrom((schema.maxLength ?? 64) + 1, 200, 1_000, 4_000), fc.constantFrom("a", "%C3%A9", "%00"))
    .map(([n, unit]) => unit.repeat(n));
  if (schema.type === "integer") {
    return fc.oneof(
      { arbitrary: fc.constantFrom(...HOSTILE_INTEGER_TEXTS), weight: 4 },
      { arbitrary: fc.integer().map(String), weight: 1 },
      { arbitrary: fc.double().map((d) => pct(String(d))), weight: 1 },
      { arbitrary: fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String), weight: 1 },
      { arbitrary: common, weight: 2 },
    );
  }
  const patternBreakers =
    param.name === "tenant_id"
      ? fc.constantFrom("ACME", "-acme", "acme_", "a".repeat(64), "ac%20me", "acme%0A", "%C3%A1cme", "acme.", "Acme")
      : fc.constant("x");
  return fc.oneof(
    { arbitrary: common, weight: 3 },
    { arbitrary: lengths, weight: 1 },
    { arbitrary: patternBreakers, weight: 1 },
  );
}

function buildPath(op: OperationModel, values: Record<string, string>): string {
  return op.segments
    .map((s) => {
      const m = /^\{(\w+)\}$/.exec(s);
      return m ? values[m[1]!]! : s;
    })
    .join("/");
}

function collections(world: World): string[] {
  const out: string[] = ["users:x", "payments:", "", "posts:acme:1"];
  for (const [tenant, f] of Object.entries(world.tenants)) {
    out.push(`users:${tenant}`, `payments:${tenant}`, `posts:${tenant}`);
    for (const p of f.payments) out.push(`refunds:${tenant}:${p.id}`);
    // A member's own payment list is a list of its own.
    for (const u of Object.values(world.tenants).flatMap((x) => x.userIds))
      out.push(`orders:${tenant}:${u}`, `payments:${tenant}:${u}`);
  }
  return out;
}

/** The list a cursor of each operation names (the cursor format is `{v, c, t, i}` in base64url). */
const CURSOR_COLLECTION: Record<string, string> = {
  listUsers: "users:",
  listPayments: "payments:",
  listRefunds: "refunds:",
  listUserOrders: "orders:",
  listPosts: "posts:",
};

/** Positions a forged cursor may name: at and past the ends of time and of JavaScript numbers. */
const CURSOR_TIMES: unknown[] = [
  Date.now(),
  0,
  -1,
  1,
  8.64e15,
  -8.64e15,
  8.64e15 + 1,
  -8.64e15 - 1,
  1e300,
  1.5,
  -1e15,
  253402300800000,
  -62135596800000,
  Number.MAX_SAFE_INTEGER,
  "1",
  null,
];
/** Ids a forged cursor may carry: not numbers, injections, NUL, emoji, absurd lengths. */
const CURSOR_IDS: unknown[] = [
  "1",
  "2",
  "0",
  "-1",
  "abc",
  "",
  "\u0000",
  "' OR 1=1 --",
  "9".repeat(30),
  "pay_AAAAAAAAAAAAAAAAAAAA",
  "💳",
  "1e3",
  " 1",
  1,
  null,
];

/** A cursor that decodes: many name the very list asked for, at absurd positions (far past, injected ids). */
function forgedCursor(world: World, op?: OperationModel): fc.Arbitrary<string> {
  const all = collections(world);
  const prefix = op ? CURSOR_COLLECTION[op.operationId] : undefined;
  const own = prefix ? all.filter((c) => c.startsWith(prefix)) : [];
  return fc
    .record({
      v: fc.constantFrom<unknown>(1, 1, 1, 1, 1, 2, "1", null, 0),
      c:
        own.length > 0
          ? fc.oneof(
              { arbitrary: fc.constantFrom(...own), weight: 3 },
              { arbitrary: fc.constantFrom(...all), weight: 1 },
            )
          : fc.constantFrom(...all),
      t: fc.constantFrom(...CURSOR_TIMES),
      i: fc.constantFrom(...CURSOR_IDS),
    })
    .map((c) => b64url(c))
    .filter((s) => s.length <= 512);
}

function cursorValue(world: World, op: OperationModel, param: ParamModel): fc.Arbitrary<string> {
  return fc.oneof(
    { arbitrary: forgedCursor(world, op), weight: 4 },
    { arbitrary: fc.stringMatching(/^[A-Za-z0-9_-]{1,100}$/), weight: 2 },
    { arbitrary: fc.string({ unit: "binary", minLength: 1, maxLength: 60 }).map((s) => pct(s)), weight: 1 },
    {
      arbitrary: fc.constantFrom(
        "",
        "%00",
        "a".repeat((param.schema.maxLength ?? 512) + 1),
        "A".repeat(512),
        b64url({ v: 1 }),
        b64url([]),
        b64url("x"),
        "bnVsbA",
        "e30",
        "%FF",
        "%ZZ",
      ),
      weight: 2,
    },
  );
}

function queryValue(world: World, op: OperationModel, param: ParamModel): fc.Arbitrary<string> {
  if (param.name === "cursor") return cursorValue(world, op, param);
  if (param.schema.type === "integer") {
    return fc.oneof(
      { arbitrary: validValue(param.schema).map(String), weight: 3 },
      {
        arbitrary: fc.constantFrom(...HOSTILE_INTEGER_TEXTS, "", "+5", "5+", "1000000", "1000001", "100", "101"),
        weight: 3,
      },
      { arbitrary: fc.integer().map(String), weight: 1 },
    );
  }
  return fc.oneof(
    validValue(param.schema).map((v) => pct(String(v))),
    fc.string({ unit: "binary", maxLength: 40 }).map((s) => pct(s)),
  );
}

function queryArb(world: World, op: OperationModel): fc.Arbitrary<{ query: string; label: string }> {
  const declared = op.queryParams;
  const pieces = fc.array(
    fc.oneof(
      {
        arbitrary:
          declared.length > 0
            ? fc.constantFrom(...declared).chain((p) => queryValue(world, op, p).map((v) => `${p.name}=${v}`))
            : fc.constant("page=1"),
        weight: 5,
      },
      {
        arbitrary: fc.constantFrom(
          "foo=bar",
          "__proto__=1",
          "constructor=x",
          "limit[]=1",
          "LIMIT=5",
          "cursor%00=x",
          "a=%",
          "%ZZ=1",
          "=",
          "&",
          "limit",
          "cursor",
          "x=%FF",
          "a=1;b=2",
          "?",
          "limit=1#frag",
          "limit=%2B1",
          `pad=${"x".repeat(3_000)}`,
        ),
        weight: 1,
      },
    ),
    { minLength: 1, maxLength: 4 },
  );
  return fc.oneof(
    { arbitrary: fc.constant({ query: "", label: "" }), weight: 2 },
    {
      arbitrary: pieces.map((p) => ({ query: `?${p.join("&")}`, label: `query ${p.join("&").slice(0, 80)}` })),
      weight: 5,
    },
  );
}

// ---------------------------------------------------------------------------------------------
// Header abuse.

const TOKEN_METHODS = [
  "GET",
  "POST",
  "PUT",
  "PATCH",
  "DELETE",
  "OPTIONS",
  "TRACE",
  "PROPFIND",
  "MKCOL",
  "COPY",
  "MOVE",
  "LOCK",
  "UNLOCK",
  "SEARCH",
  "PURGE",
  "REPORT",
  "LINK",
  "UNLINK",
  "QUERY",
];

function idempotencyKeyArb(): fc.Arbitrary<{ label: string; value: HeaderValue }> {
  return fc.oneof(
    fc.uuid().map((u) => ({ label: "a fresh UUID", value: u })),
    fc
      .uuid()
      .chain((u) =>
        fc
          .constantFrom<[string, HeaderValue]>(
            ["an empty key", ""],
            ["a blank key", "   "],
            ["not a UUID", "not-a-uuid"],
            ["UUID without dashes", u.replaceAll("-", "")],
            ["UUID in braces", `{${u}}`],
            ["URN form", `urn:uuid:${u}`],
            ["UUID plus a char", `${u}x`],
            ["upper-case UUID", u.toUpperCase()],
            ["nil UUID", "00000000-0000-0000-0000-000000000000"],
            ["UUID with a space inside", `${u.slice(0, 8)} ${u.slice(9)}`],
            ["UUID with latin-1 bytes", Buffer.concat([Buffer.from(u.slice(0, 35)), Buffer.from([0xe9])])],
            ["a 1000-char key", "a".repeat(1_000)],
            ["SQL in the key", "' OR 1=1 --"],
            ["two keys in one", `${u}, ${u}`],
          )
          .map(([label, value]) => ({ label, value })),
      ),
  );
}

function etagLike(world: World): fc.Arbitrary<string> {
  const etags = Object.values(world.tenants).flatMap((t) => t.docs.map((d) => d.etag));
  return fc.oneof(
    fc.constantFrom(
      ...etags,
      ...etags.map((e) => `W/${e}`),
      "*",
      "",
      '""',
      'W/"x"',
      '"x", *',
      ",",
      ", ,",
      '"unterminated',
      "W/",
      "*, *",
      '"a","b"',
      "\u00e9",
      "x".repeat(1_024),
      "x".repeat(1_025),
    ),
    fc.string({ unit: "grapheme-ascii", maxLength: 60 }).map((s) => s.replace(/[\r\n]/g, "")),
  );
}

// ---------------------------------------------------------------------------------------------
// Assembling requests.

export interface FuzzerOptions {
  model: ApiModel;
  world: World;
}

interface Plan {
  what: string[];
  method: string;
  target: string | Buffer;
  headers: Header[];
  body?: BodySpec | undefined;
}

export function createFuzzer({ model, world }: FuzzerOptions) {
  const ops = model.operations.filter((op) => op.operationId !== "getOpenApiDocument");
  const bodyOps = ops.filter((op) => op.body);
  const listPosts = ops.find((op) => op.operationId === "listPosts");

  /** The final request: its expectation, and no valid credential where that could change stored data. */
  function finalize(property: string, plan: Plan): FuzzRequest {
    const raw: RawRequest = {
      method: plan.method,
      target: plan.target,
      headers: plan.headers,
      body: plan.body?.bytes,
      framing: plan.body?.framing,
    };
    const facts = plan.body?.facts ?? {};
    let expectation = expectationOf(model, world, raw, facts);
    const what = [...plan.what];
    const credential = holderOf(world, nodeHeaders(raw.headers).authorization);
    if (credential && (expectation.unsafe || (expectation.operation?.mutating && expectation.paramFault))) {
      raw.headers = raw.headers.filter(([n]) => n.toLowerCase() !== "authorization");
      what.push("credential left out: the request could change stored data");
      expectation = expectationOf(model, world, raw, facts);
    }
    if (expectation.unsafe)
      throw new Error(`generator bug: could change stored data even without a credential: ${what.join(", ")}`);
    const r = { property, what: what.filter(Boolean).join(", "), raw, expectation };
    return { ...r, [fc.toStringMethod]: () => describeRequest(r) };
  }

  /** Headers every request to the operation starts from (a fresh Idempotency-Key where it takes one). */
  function baseHeaders(op: OperationModel, body: BodySpec | undefined, key: string): Header[] {
    const headers: Header[] = [["Accept", "application/json"]];
    if (body && body.contentType !== null) headers.push(["Content-Type", body.contentType ?? "application/json"]);
    if (op.headerParams.some((p) => p.key === "idempotency-key")) headers.push(["Idempotency-Key", key]);
    return headers;
  }

  const wellFormedPath = (op: OperationModel) =>
    fc
      .tuple(...op.pathParams.map((p) => wellFormedParam(world, p)))
      .map((values) => buildPath(op, Object.fromEntries(op.pathParams.map((p, i) => [p.name, values[i]!]))));

  const contentTypeArb = fc.oneof(
    { arbitrary: fc.constant<string | null | undefined>(undefined), weight: 8 },
    { arbitrary: fc.constantFrom<string | null | undefined>(...CONTENT_TYPES), weight: 2 },
  );

  // --- (a)+(b) bodies -----------------------------------------------------------------------
  const bodyRequest = fc
    .constantFrom(...bodyOps)
    .chain((op) =>
      fc.record({
        op: fc.constant(op),
        path: wellFormedPath(op),
        body: bodyFor(op, model.maxBodyBytes, { valid: 1, mutated: 6, raw: 4 }),
        contentType: contentTypeArb,
        auth: authArb(world),
        key: fc.uuid(),
      }),
    )
    .map(({ op, path, body, contentType, auth, key }) => {
      const spec: BodySpec = contentType === undefined ? body : { ...body, contentType };
      const headers = [...baseHeaders(op, spec, key), ...authHeader(world, auth)];
      return finalize("bodies", {
        what: [
          op.operationId,
          authLabel(auth),
          spec.label,
          contentType !== undefined ? `Content-Type ${JSON.stringify(contentType)}` : "",
        ],
        method: op.method,
        target: path,
        headers,
        body: spec,
      });
    });

  // --- (c) paths, methods and parameters ----------------------------------------------------
  const structural = (path: string): fc.Arbitrary<{ path: string; label: string }> =>
    fc.oneof(
      fc.constant({ path: `${path}/`, label: "trailing slash" }),
      fc.constant({ path: path.replace(/^\/v1\//, "/v1//"), label: "double slash" }),
      fc
        .constantFrom("x", "..", ".", "%2E%2E", "refunds", "items", "1")
        .map((s) => ({ path: `${path}/${s}`, label: `extra segment ${s}` })),
      fc.constant({ path: path.split("/").slice(0, -1).join("/") || "/", label: "last segment dropped" }),
      fc
        .constantFrom("/./", "/../", "/%2e/", "/%2E%2E/")
        .map((d) => ({ path: path.replace(/^\/v1\//, `/v1${d}`), label: `dot segment ${d}` })),
      fc.constant({
        path: path.replace(/\/v1\/([a-z]+)/, (_m, s: string) => `/v1/${s.toUpperCase()}`),
        label: "upper-case literal segment",
      }),
      fc.constant({ path: path.replace("/v1/", "/%76%31/"), label: "percent-encoded literal segment" }),
      fc
        .constantFrom("/v3", "/api", "/", "/V1", "/v1.0")
        .map((p) => ({ path: path.replace(/^\/v1/, p), label: `prefix ${p}` })),
      fc.constant({ path: `http://127.0.0.1${path}`, label: "absolute-form target" }),
      fc.constant({ path: "*", label: "asterisk-form target" }),
      fc.constant({ path: `${path};jsessionid=1`, label: "matrix parameter" }),
      fc.constant({ path: `${path}#fragment`, label: "fragment" }),
      fc
        .integer({ min: 100, max: 9_000 })
        .map((n) => ({ path: `${path}/${"a".repeat(n)}`, label: `a ${n}-char extra segment` })),
      fc
        .integer({ min: 20, max: 400 })
        .map((n) => ({ path: `${path}${"/x".repeat(n)}`, label: `${n} extra segments` })),
      fc
        .constantFrom(
          "/v1/nothing",
          "/v1",
          "/v1/tenants",
          "/v1/tenants/acme",
          "/v1/users",
          "/v1/users/1",
          "/v1/catalog",
          "/v1/catalog/items/1",
          "/v1/openapi.yaml",
          "/favicon.ico",
          "/.env",
          "/v1/payments/pay_x/refunds/re_x/y",
        )
        .map((p) => ({ path: p, label: "unknown route" })),
    );

  // A cursor forged for exactly the list and the caller asked for (so that it gets past the "cursor of
  // another list" check), naming an absurd position: the service must answer a page or 400, never 500.
  const listOps = ops.filter((op) => CURSOR_COLLECTION[op.operationId]);
  const forgedCursorRequest = fc
    .record({
      op: fc.constantFrom(...listOps),
      holder: fc.constantFrom<Holder>("alice", "bob", "carol"),
      v: fc.constantFrom<unknown>(1, 1, 1, 1, 2, "1"),
      t: fc.constantFrom(...CURSOR_TIMES),
      i: fc.constantFrom(...CURSOR_IDS),
      stream: fc.boolean(),
    })
    .map(({ op, holder, v, t, i, stream }) => {
      const { tenant, userId, role } = world.holders[holder];
      // A payment the holder may see (an admin every one of the tenant's, a member their own).
      const payment =
        world.tenants[tenant]!.payments.find((p) => role === "admin" || p.userId === userId)?.id ??
        "pay_AAAAAAAAAAAAAAAAAAAA";
      const values: Record<string, string> = { tenant_id: tenant, payment_id: payment, user_id: String(userId) };
      // A member's payment list is their own (x-switchyard-access tenant-own-items): its cursors name it.
      const ownItems = op.access === "tenant-own-items" && role !== "admin" ? `:${userId}` : "";
      const collection = `${CURSOR_COLLECTION[op.operationId]}${tenant}${op.operationId === "listRefunds" ? `:${payment}` : op.operationId === "listUserOrders" ? `:${userId}` : ownItems}`;
      const cursor = b64url({ v, c: collection, t, i });
      const sse = stream && op.operationId === "listPosts";
      const headers: Header[] = [
        ["Accept", sse ? "text/event-stream" : "application/json"],
        ["Authorization", `Bearer ${world.tokens[holder]}`],
      ];
      if (sse) headers.push(["Last-Event-ID", cursor]);
      const target = `${buildPath(op, values)}${sse ? "" : `?cursor=${cursor}`}`;
      return finalize("paths", {
        what: [
          op.operationId,
          `as ${holder}`,
          `forged ${sse ? "Last-Event-ID" : "cursor"} ${JSON.stringify({ v, c: collection, t, i })}`,
        ],
        method: "GET",
        target,
        headers,
      });
    });

  const pathRequestOf = fc
    .constantFrom(...ops)
    .chain((op) => {
      const hostile: fc.Arbitrary<[number, string]> =
        op.pathParams.length > 0
          ? fc
              .integer({ min: 0, max: op.pathParams.length - 1 })
              .chain((i) => hostileParam(op.pathParams[i]!).map((v): [number, string] => [i, v]))
          : fc.constant<[number, string]>([-1, ""]);
      return fc.record({
        op: fc.constant(op),
        values: fc.tuple(...op.pathParams.map((p) => wellFormedParam(world, p))),
        hostile,
        key: fc.uuid(),
        shape: fc.constantFrom("hostile parameter", "hostile parameter", "well-formed", "structural"),
        query: queryArb(world, op),
        method: fc.oneof(
          { arbitrary: fc.constant(op.method), weight: 8 },
          { arbitrary: fc.constant(op.method === "GET" ? "HEAD" : op.method), weight: 1 },
          { arbitrary: fc.constantFrom(...TOKEN_METHODS), weight: 1 },
        ),
        body: op.body ? bodyFor(op, model.maxBodyBytes, { valid: 3, mutated: 1, raw: 1 }) : fc.constant(undefined),
        auth: authArb(world, { valid: 6, none: 2, garbage: 2 }),
      });
    })
    .chain((r) => {
      const values = Object.fromEntries(r.op.pathParams.map((p, i) => [p.name, r.values[i]!]));
      let label = "";
      if (r.shape === "hostile parameter" && r.hostile[0] >= 0) {
        const p = r.op.pathParams[r.hostile[0]]!;
        values[p.name] = r.hostile[1];
        label = `${p.name} = ${JSON.stringify(r.hostile[1].length > 60 ? `${r.hostile[1].slice(0, 60)}…(${r.hostile[1].length})` : r.hostile[1])}`;
      }
      const path = buildPath(r.op, values);
      const shaped = r.shape === "structural" ? structural(path) : fc.constant({ path, label });
      return shaped.map((s) => ({ ...r, path: s.path, label: s.label }));
    })
    .map((r) => {
      const headers = [...baseHeaders(r.op, r.body, r.key), ...authHeader(world, r.auth)];
      const target = `${r.path}${r.query.query}`;
      return finalize("paths", {
        what: [`${r.op.operationId} (${r.method})`, authLabel(r.auth), r.label, r.query.label],
        method: r.method,
        target,
        headers,
        body: r.body,
      });
    });
  const pathRequest = fc.oneof({ arbitrary: pathRequestOf, weight: 9 }, { arbitrary: forgedCursorRequest, weight: 1 });

  // --- (d) header abuse ---------------------------------------------------------------------
  type Abuse = { label: string; headers: Header[]; drop?: string[] };
  const abuseArb: fc.Arbitrary<Abuse> = fc.oneof(
    {
      arbitrary: garbageAuth(world).map((a): Abuse => ({
        label: authLabel(a),
        headers: authHeader(world, a),
        drop: ["authorization"],
      })),
      weight: 4,
    },
    {
      arbitrary: fc
        .tuple(fc.constantFrom<Holder>("alice", "bob", "carol"), garbageAuth(world), fc.boolean())
        .map(([h, g, validFirst]): Abuse => {
          const valid: Header = ["Authorization", `Bearer ${world.tokens[h]}`];
          const bad = authHeader(world, g)[0]!;
          return {
            label: `two Authorization headers (${validFirst ? `${h}'s first` : `${authLabel(g)} first`})`,
            headers: validFirst ? [valid, bad] : [bad, valid],
            drop: ["authorization"],
          };
        }),
      weight: 1,
    },
    {
      arbitrary: idempotencyKeyArb().map((k): Abuse => ({
        label: `Idempotency-Key: ${k.label}`,
        headers: [["Idempotency-Key", k.value]],
        drop: ["idempotency-key"],
      })),
      weight: 3,
    },
    {
      arbitrary: fc.tuple(idempotencyKeyArb(), idempotencyKeyArb()).map(([a, b]): Abuse => ({
        label: "two Idempotency-Key headers",
        headers: [
          ["Idempotency-Key", a.value],
          ["Idempotency-Key", b.value],
        ],
        drop: ["idempotency-key"],
      })),
      weight: 1,
    },
    {
      arbitrary: etagLike(world).map((e): Abuse => ({
        label: `If-Match ${JSON.stringify(e.slice(0, 40))}`,
        headers: [["If-Match", e]],
      })),
      weight: 2,
    },
    {
      arbitrary: etagLike(world).map((e): Abuse => ({
        label: `If-None-Match ${JSON.stringify(e.slice(0, 40))}`,
        headers: [["If-None-Match", e]],
      })),
      weight: 2,
    },
    {
      arbitrary: fc
        .tuple(
          fc.oneof(forgedCursor(world, listPosts), fc.constantFrom("", "garbage", "%%", "a".repeat(513), "\u00e9")),
          fc.constantFrom(
            "text/event-stream",
            "text/event-stream, application/json",
            "application/json",
            "TEXT/EVENT-STREAM",
          ),
        )
        .map(([id, accept]): Abuse => ({
          label: `Last-Event-ID ${JSON.stringify(id.slice(0, 30))} with Accept ${accept}`,
          headers: [
            ["Accept", accept],
            ["Last-Event-ID", id],
          ],
          drop: ["accept"],
        })),
      weight: 2,
    },
    {
      arbitrary: fc
        .constantFrom(
          "*/*",
          "text/html",
          "application/xml",
          "application/json;q=0",
          "text/event-stream;q=0, application/json",
          "",
          "garbage",
          "*/*;q=abc",
        )
        .map((a): Abuse => ({ label: `Accept ${JSON.stringify(a)}`, headers: [["Accept", a]], drop: ["accept"] })),
      weight: 1,
    },
    {
      arbitrary: fc
        .constantFrom(
          "0",
          "-1",
          "abc",
          "",
          "1e3",
          "1.5",
          "9999999999",
          "0x10",
          "١٢",
          "5000, 5000",
          " 5000 ",
          "30000",
          "999999999",
          "1000",
          "%35",
        )
        .map((v): Abuse => ({
          label: `X-Request-Timeout-Ms ${JSON.stringify(v)}`,
          headers: [["X-Request-Timeout-Ms", Buffer.from(v, "utf8")]],
        })),
      weight: 2,
    },
    {
      arbitrary: fc.constantFrom(...CONTENT_TYPES).map((ct): Abuse => ({
        label: `Content-Type ${JSON.stringify(ct)}`,
        headers: ct === null ? [] : [["Content-Type", ct]],
        drop: ["content-type"],
      })),
      weight: 2,
    },
    {
      arbitrary: fc.constantFrom("application/json", "text/plain").map((second): Abuse => ({
        label: `two Content-Type headers (application/json, then ${second})`,
        headers: [
          ["Content-Type", "application/json"],
          ["Content-Type", second],
        ],
        drop: ["content-type"],
      })),
      weight: 1,
    },
    {
      arbitrary: fc
        .tuple(
          fc.oneof(
            { arbitrary: fc.integer({ min: 1_000, max: 12_000 }), weight: 9 },
            { arbitrary: fc.integer({ min: 17_500, max: 64_000 }), weight: 1 },
          ),
          fc.constantFrom("X-Fuzz-Pad", "Cookie", "User-Agent", "Referer", "X-Forwarded-For"),
        )
        .map(([n, name]): Abuse => ({ label: `${name} of ${n} bytes`, headers: [[name, "a".repeat(n)]] })),
      weight: 2,
    },
    {
      arbitrary: fc.integer({ min: 50, max: 400 }).map((n): Abuse => ({
        label: `${n} extra headers`,
        headers: Array.from({ length: n }, (_, i): Header => [`X-Fuzz-${i}`, "v"]),
      })),
      weight: 1,
    },
    {
      arbitrary: fc.constantFrom<Abuse>(
        { label: "Expect: 100-continue", headers: [["Expect", "100-continue"]] },
        {
          label: "X-Forwarded-For garbage",
          headers: [["X-Forwarded-For", "'; DROP TABLE x; --, 999.1.1.1, ::ffff:zz"]],
        },
        { label: "Forwarded garbage", headers: [["Forwarded", 'for="_gazonk"; proto=javascript']] },
        { label: "X-HTTP-Method-Override: DELETE", headers: [["X-HTTP-Method-Override", "DELETE"]] },
        { label: "Range", headers: [["Range", "bytes=0-1, -99999999999999999999"]] },
        { label: "If-Modified-Since garbage", headers: [["If-Modified-Since", "yesterday-ish"]] },
        { label: "Origin", headers: [["Origin", "https://evil.example"]] },
        { label: "Upgrade without Connection: upgrade", headers: [["Upgrade", "websocket"]] },
        { label: "Accept-Encoding garbage", headers: [["Accept-Encoding", "gzip;q=2, br;q=-1, *;q=x"]] },
        { label: "Via loop", headers: [["Via", "1.1 gateway, ".repeat(50)]] },
        { label: "upper-case header names", headers: [["ACCEPT", "application/json"]] },
        { label: "header value with latin-1 bytes", headers: [["X-Fuzz", Buffer.from([0xe9, 0xff, 0xa0, 0x80])]] },
        { label: "header value with UTF-8 bytes", headers: [["X-Fuzz", Buffer.from("💳é", "utf8")]] },
        { label: "header value with tabs", headers: [["X-Fuzz", "\ta\tb\t"]] },
      ),
      weight: 2,
    },
  );

  const headerRequest = fc
    .constantFrom(...ops)
    .chain((op) =>
      fc.record({
        op: fc.constant(op),
        path: wellFormedPath(op),
        body: op.body ? bodyFor(op, model.maxBodyBytes, { valid: 3, mutated: 2, raw: 1 }) : fc.constant(undefined),
        auth: authArb(world, { valid: 6, none: 1, garbage: 1 }),
        abuses: fc.array(abuseArb, { minLength: 1, maxLength: 3 }),
        key: fc.uuid(),
      }),
    )
    .map(({ op, path, body, auth, abuses, key }) => {
      const dropped = new Set(abuses.flatMap((a) => a.drop ?? []));
      const headers = [...baseHeaders(op, body, key), ...authHeader(world, auth)].filter(
        ([n]) => !dropped.has(n.toLowerCase()),
      );
      for (const a of abuses) headers.push(...a.headers);
      return finalize("headers", {
        what: [
          op.operationId,
          dropped.has("authorization") ? "" : authLabel(auth),
          ...abuses.map((a) => a.label),
          body?.label ?? "",
        ],
        method: op.method,
        target: path,
        headers,
        body,
      });
    });

  // --- HTTP itself broken -------------------------------------------------------------------
  const malformed = (
    label: string,
    bytes: Buffer | string,
    outcomes: Outcome[] = [{ status: 400, codes: ["INVALID_REQUEST"] }],
  ): FuzzRequest => {
    const r = {
      property: "protocol",
      what: label,
      raw: {
        method: "?",
        target: "",
        headers: [],
        raw: typeof bytes === "string" ? Buffer.from(bytes, "latin1") : bytes,
      } as RawRequest,
      expectation: {
        outcomes: outcomes.map((o) => ({ ...o, bare: true })),
        unsafe: false,
        paramFault: false,
        operation: undefined,
        protocol: true,
      },
    };
    return { ...r, [fc.toStringMethod]: () => describeRequest(r) };
  };
  const token = world.tokens.alice;
  const line = (method: string, target: string, extra = "", version = "HTTP/1.1") =>
    `${method} ${target} ${version}\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer ${token}\r\n${extra}\r\n`;
  // Every method node's HTTP parser knows (RTSP's included): anything else is not a method to it.
  const PARSER_METHODS = [
    "DELETE",
    "GET",
    "HEAD",
    "POST",
    "PUT",
    "CONNECT",
    "OPTIONS",
    "TRACE",
    "COPY",
    "LOCK",
    "MKCOL",
    "MOVE",
    "PROPFIND",
    "PROPPATCH",
    "SEARCH",
    "UNLOCK",
    "BIND",
    "REBIND",
    "UNBIND",
    "ACL",
    "REPORT",
    "MKACTIVITY",
    "CHECKOUT",
    "MERGE",
    "M-SEARCH",
    "NOTIFY",
    "SUBSCRIBE",
    "UNSUBSCRIBE",
    "PATCH",
    "PURGE",
    "MKCALENDAR",
    "LINK",
    "UNLINK",
    "SOURCE",
    "PRI",
    "DESCRIBE",
    "ANNOUNCE",
    "SETUP",
    "PLAY",
    "PAUSE",
    "TEARDOWN",
    "GET_PARAMETER",
    "SET_PARAMETER",
    "REDIRECT",
    "RECORD",
    "FLUSH",
    "QUERY",
  ];
  const sessions = "/v1/tenants/acme/sessions";
  const protocolRequest: fc.Arbitrary<FuzzRequest> = fc.oneof(
    fc
      .stringMatching(/^[A-Z][A-Z-]{2,11}$/)
      .filter((m) => !PARSER_METHODS.some((known) => known.startsWith(m) || m.startsWith(known)))
      .map((m) =>
        malformed(`unknown method ${m}`, line(m, "/v1/payments"), [
          { status: 400, codes: ["INVALID_REQUEST"] },
          { status: 405, codes: ["METHOD_NOT_ALLOWED"] },
          { status: 501 },
        ]),
      ),
    fc
      .constantFrom("get", "Get", "G E T", "GET\u0000", "GETX".repeat(50))
      .map((m) => malformed(`method ${JSON.stringify(m.slice(0, 20))}`, line(m, "/v1/payments"))),
    fc.constantFrom("/v1/payments", "127.0.0.1:443", "/v1/orders/1/cancel").map((t) =>
      malformed(`CONNECT ${t}`, line("CONNECT", t), [
        { status: 400, codes: ["INVALID_REQUEST"] },
        { status: 405, codes: ["METHOD_NOT_ALLOWED"] },
      ]),
    ),
    fc
      .constantFrom("HTTP/1.2", "HTTP/3.7", "HTTP/1", "HTTP/1.1.1", "HTTPS/1.1", "http/1.1", "HTTP/11")
      .map((v) =>
        malformed(`version ${JSON.stringify(v)}`, line("GET", "/v1/payments", "", v), [
          { status: 400, codes: ["INVALID_REQUEST"] },
          { status: 505 },
        ]),
      ),
    fc
      .constantFrom("\u0001", "\u0000", "\u007f", "\u001b", "\r")
      .map((c) =>
        malformed(
          `control character ${JSON.stringify(c)} in a header value`,
          line("GET", "/v1/payments", `X-Fuzz: a${c}b\r\n`),
        ),
      ),
    fc
      .constantFrom(
        ["obs-fold", "X-Fuzz: a\r\n b\r\n"],
        ["space before the colon", "Host : x\r\n"],
        ["header without a colon", "NoColon\r\n"],
        ["empty header name", ": v\r\n"],
        ["space in a header name", "X Fuzz: v\r\n"],
        ["non-token header name", "X(Fuzz): v\r\n"],
        ["Content-Length and Transfer-Encoding", "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n"],
        ["two different Content-Lengths", "Content-Length: 2\r\nContent-Length: 3\r\n"],
        ["negative Content-Length", "Content-Length: -1\r\n"],
        ["non-numeric Content-Length", "Content-Length: 1e3\r\n"],
        ["Content-Length with a plus", "Content-Length: +2\r\n"],
        ["Transfer-Encoding gzip", "Transfer-Encoding: gzip\r\n"],
        ["Transfer-Encoding chunked, chunked", "Transfer-Encoding: chunked, chunked\r\n"],
        ["Transfer-Encoding with a space before the colon", "Transfer-Encoding : chunked\r\n"],
      )
      .map(([label, extra]) =>
        malformed(label, `${line("POST", sessions, `Content-Type: application/json\r\n${extra}`)}{}`, [
          { status: 400, codes: ["INVALID_REQUEST"] },
          { status: 501 },
        ]),
      ),
    fc
      .constantFrom(
        "zz\r\n{}\r\n0\r\n\r\n",
        "3\r\n{}\r\n0\r\n\r\n",
        "-1\r\n{}\r\n0\r\n\r\n",
        "2;ext=\u0001\r\n{}\r\n0\r\n\r\n",
        "0x2\r\n{}\r\n0\r\n\r\n",
      )
      .map((chunks) =>
        malformed(
          `broken chunked body ${JSON.stringify(chunks.slice(0, 12))}`,
          line("POST", sessions, "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n") + chunks,
        ),
      ),
    fc.constant(
      malformed(
        "bare LF line endings",
        `GET /v1/payments HTTP/1.1\nHost: x\nConnection: close\nAuthorization: Bearer ${token}\n\n`,
      ),
    ),
    fc.constant(
      malformed(
        "HTTP/1.1 without Host",
        `GET /v1/payments HTTP/1.1\r\nConnection: close\r\nAuthorization: Bearer ${token}\r\n\r\n`,
      ),
    ),
    fc.constant(
      malformed(
        "two Host headers",
        `GET /v1/payments HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\nAuthorization: Bearer ${token}\r\n\r\n`,
        [{ status: 400, codes: ["INVALID_REQUEST"] }, { status: 200 }],
      ),
    ),
    fc
      .constantFrom(
        Buffer.from("/v1/payments/pay_é", "utf8"),
        Buffer.from("/v1/pay ments"),
        Buffer.from("/v1/pay\u007fments"),
        Buffer.from([0x2f, 0x76, 0x31, 0x2f, 0xff, 0xfe]),
        Buffer.from("/v1/payments\u0000"),
      )
      .map((t) =>
        malformed(
          `raw bytes ${t.toString("hex")} in the target`,
          Buffer.concat([Buffer.from("GET "), t, Buffer.from(" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")]),
        ),
      ),
    fc
      .integer({ min: 17_500, max: 40_000 })
      .map((n) =>
        malformed(`target of ${n} bytes`, line("GET", `/v1/payments/${"a".repeat(n)}`), [
          { status: 431, codes: ["INVALID_REQUEST"] },
          { status: 414 },
          { status: 400, codes: ["INVALID_REQUEST"] },
        ]),
      ),
    fc
      .integer({ min: 2_800, max: 4_000 })
      .map((n) =>
        malformed(
          `${n} header lines`,
          line("GET", "/v1/payments", Array.from({ length: n }, (_, i) => `X-${i}: v\r\n`).join("")),
          [{ status: 431, codes: ["INVALID_REQUEST"] }],
        ),
      ),
    fc.uint8Array({ minLength: 1, maxLength: 300 }).map((bytes) =>
      malformed("random bytes", Buffer.concat([Buffer.from([0x01]), Buffer.from(bytes), Buffer.from("\r\n\r\n")]), [
        { status: 400, codes: ["INVALID_REQUEST"] },
        { status: 431, codes: ["INVALID_REQUEST"] },
      ]),
    ),
    fc.constant(
      malformed(
        "TLS ClientHello",
        Buffer.concat([Buffer.from("16030100a5010000a103", "hex"), Buffer.from("\r\n\r\n")]),
      ),
    ),
    fc.constant(malformed("HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")),
    // RFC 9110 §10.1.1: an unknown expectation MAY be refused with 417 (then with the error body), or ignored.
    fc
      .constantFrom("garbage", "100-continue, garbage", "200-ok")
      .map((v) =>
        malformed(`Expect: ${v}`, line("GET", "/v1/payments", `Expect: ${v}\r\n`), [
          { status: 417, codes: ["INVALID_REQUEST"] },
          { status: 400, codes: ["INVALID_REQUEST"] },
          { status: 200 },
        ]),
      ),
  );

  return {
    bodyRequest,
    pathRequest,
    headerRequest,
    protocolRequest,
    /** A batch of requests to send at once (bounded concurrency). */
    batch: (arb: fc.Arbitrary<FuzzRequest>, max: number) => fc.array(arb, { minLength: 1, maxLength: max }),
  };
}
