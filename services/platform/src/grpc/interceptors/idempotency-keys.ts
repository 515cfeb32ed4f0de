// The Idempotency-Key rules, declared per method beside a service's call policy: which methods take a
// key (their request's `idempotency_key`) and whether it may be left out. A key that is not a UUID is
// refused (IDEMPOTENCY_KEY_INVALID) before the handler runs; the handler then only uses it.
import { ScalarType, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { assertIdempotencyKey } from "../../idempotency-keys.js";
import type { MethodName } from "../call-policy.js";
import type { Interceptor, ServiceInterceptor } from "./chain.js";

/** A method's key: one must be sent, or none may be (an empty key) and one sent must be good. */
export type IdempotencyKeyRule = "required" | "optional";

/** The methods of a service that take an Idempotency-Key; a method not named takes none. */
export type IdempotencyKeyRules<S extends DescService> = { readonly [M in MethodName<S>]?: IdempotencyKeyRule };

interface KeyedRequest {
  readonly idempotencyKey: string;
}

const required: Interceptor = (next) => (call) => {
  assertIdempotencyKey((call.message as KeyedRequest).idempotencyKey);
  return next(call);
};

const optional: Interceptor = (next) => (call) => {
  const key = (call.message as KeyedRequest).idempotencyKey;
  if (key !== "") assertIdempotencyKey(key);
  return next(call);
};

/** A rule can only be kept on a unary method whose request has a string `idempotency_key`: checked at start. */
function assertKeyed(method: DescMethod): void {
  const field = method.input.fields.find((f) => f.name === "idempotency_key");
  const keyed = field?.fieldKind === "scalar" && field.scalar === ScalarType.STRING && field.oneof === undefined;
  if (method.methodKind !== "unary" || !keyed) {
    const name = `${method.parent.typeName}/${method.name}`;
    throw new Error(`${name} takes no idempotency_key of its own: it can have no Idempotency-Key rule`);
  }
}

export function idempotencyKeys<S extends DescService>(rules: IdempotencyKeyRules<S>): ServiceInterceptor {
  return (method) => {
    const rule = (rules as Readonly<Record<string, IdempotencyKeyRule | undefined>>)[method.localName];
    if (rule === undefined) return undefined;
    assertKeyed(method);
    return rule === "required" ? required : optional;
  };
}
