// Node's AsyncResource.prototype.bind, without what made every HTTP/2 request outlive itself (issue 15).
//
// Node's http2 client binds each request's start to an AsyncResource (`session.request` →
// `reqAsync.bind(...)`). Node 20's `bind` gives the bound function its deprecated `asyncResource`
// accessor (DEP0172) through `deprecate()`, which makes a fresh closure the prototype of a fresh
// function: a new prototype map per request, kept in old space until a full GC, whose closure shares
// bind's scope — and so holds the request's stream and everything hanging off it (the whole gRPC call).
// Old space is a root for young-generation GC, so every call's objects survived their scavenges and
// were promoted: a third of what a gRPC client allocated, 8–12 ms scavenges, a full GC every few
// seconds. Measured on a bare node:http → http2 client loop (no gRPC library): 8 ms scavenges promoting
// 4 MB each before, 0.3 ms promoting nothing after; the bench's bare gRPC hop spends 35 % less CPU per
// request. This `bind` behaves the same — the bound function runs in the resource's scope, has its
// target's length, and its `asyncResource` accessor still warns DEP0172 — but that accessor is one pair
// shared by every bound function (the resource is kept on the function), and no function is made a
// prototype.
import { AsyncResource } from "node:async_hooks";

const DEP0172 = "The asyncResource property on bound functions is deprecated";
/** Node warns once per process; so does this (a flag on process, shared by any copy of this module). */
const WARNED = Symbol.for("switchyard.asyncResourceBind.warned");
function warnDeprecated(): void {
  const flags = process as unknown as { [WARNED]?: true };
  if (flags[WARNED]) return;
  flags[WARNED] = true;
  process.emitWarning(DEP0172, "DeprecationWarning", "DEP0172");
}

/** Where a bound function keeps its resource, read by the one shared accessor below. */
const RESOURCE = Symbol("asyncResource");

/** One accessor pair for every bound function: per-call closures would give each function a map of its own. */
const ASYNC_RESOURCE_ACCESSOR: PropertyDescriptor = {
  configurable: true,
  enumerable: true,
  get(this: { [RESOURCE]: AsyncResource }) {
    warnDeprecated();
    return this[RESOURCE];
  },
  set(this: { [RESOURCE]: AsyncResource }, value: AsyncResource) {
    warnDeprecated();
    this[RESOURCE] = value;
  },
};

type AnyFunction = (...args: unknown[]) => unknown;

/**
 * The bound function for a target of each small length, made with that many named parameters so that
 * it has the target's length without redefining `length` (a redefinition, like every
 * Object.defineProperty on a fresh function, is a slow runtime call — this runs once per HTTP/2 request).
 * Each is named `bound`, as Node's is.
 */
const BOUND_OF_LENGTH: ((resource: AsyncResource, fn: AnyFunction) => AnyFunction)[] = [
  (resource, fn) => {
    const bound = function (this: unknown, ...args: unknown[]) {
      return resource.runInAsyncScope(fn, this, ...args);
    };
    return bound;
  },
  (resource, fn) => {
    const bound = function (this: unknown, a: unknown, ...args: unknown[]) {
      return resource.runInAsyncScope(fn, this, a, ...args);
    };
    return bound;
  },
  (resource, fn) => {
    const bound = function (this: unknown, a: unknown, b: unknown, ...args: unknown[]) {
      return resource.runInAsyncScope(fn, this, a, b, ...args);
    };
    return bound;
  },
];

function bind(this: AsyncResource, fn: AnyFunction, thisArg?: unknown): AnyFunction {
  if (typeof fn !== "function") {
    throw Object.assign(
      new TypeError(
        `The "fn" argument must be of type function. Received ${fn === null ? "null" : `type ${typeof fn} (${String(fn)})`}`,
      ),
      { code: "ERR_INVALID_ARG_TYPE" },
    );
  }
  // eslint-disable-next-line @typescript-eslint/no-this-alias -- the wrappers run with their own caller's `this`
  const resource = this;
  const bound =
    thisArg === undefined
      ? (BOUND_OF_LENGTH[fn.length] ?? BOUND_OF_LENGTH[0]!)(resource, fn)
      : (resource.runInAsyncScope.bind(resource, fn, thisArg) as AnyFunction);
  // Only a target longer than the wrappers above (or one bound with a `this`) needs its length set.
  if (bound.length !== fn.length)
    Object.defineProperty(bound, "length", {
      configurable: true,
      enumerable: false,
      value: fn.length,
      writable: false,
    });
  // A symbol key, so no listing of the function's own names shows it; assigned, not defined (see above).
  (bound as unknown as { [RESOURCE]: AsyncResource })[RESOURCE] = resource;
  Object.defineProperty(bound, "asyncResource", ASYNC_RESOURCE_ACCESSOR);
  return bound;
}

/** Marks our bind, so that a second copy of this module (a test run loads it by two paths) leaves the first in place. */
const INSTALLED = Symbol.for("switchyard.asyncResourceBind");

/**
 * Whether Node's own bind makes an accessor per bound function (Node 20 and 24 do; Node 25 dropped the
 * property): only then is it replaced.
 */
function nodeBindMakesAccessorPerCall(): boolean {
  const getterOf = () =>
    Object.getOwnPropertyDescriptor(
      new AsyncResource("probe").bind(() => {}),
      "asyncResource",
    )?.get;
  const first = getterOf();
  return first !== undefined && first !== getterOf();
}

/** Replaces AsyncResource.prototype.bind where Node's needs it (once per process; static AsyncResource.bind calls it too). */
export function installAsyncResourceBind(): void {
  if ((AsyncResource.prototype.bind as { [INSTALLED]?: true })[INSTALLED] || !nodeBindMakesAccessorPerCall()) return;
  Object.defineProperty(bind, INSTALLED, { value: true });
  Object.defineProperty(AsyncResource.prototype, "bind", {
    configurable: true,
    enumerable: false,
    writable: true,
    value: bind,
  });
}

/** Whether this process's AsyncResource.prototype.bind is ours. */
export function asyncResourceBindInstalled(): boolean {
  return (AsyncResource.prototype.bind as { [INSTALLED]?: true })[INSTALLED] === true;
}
