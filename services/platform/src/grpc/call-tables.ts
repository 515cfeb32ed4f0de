// The tables every HTTP/2 call passes through, without what made each call outlive itself after a full GC.
//
// V8 keeps a Map's or a Set's entries in a hash table that it replaces when deletions have filled it,
// and the replaced table points to its successor (for iterators still walking it) and still holds its
// entries. Node's HTTP/2 session adds and deletes every stream in a Map and a Set, and grpc-js's
// transport every call in a Set: under load each is replaced every few dozen calls. While those tables
// are young they die together. A full GC, though, moves the live table to old space, which is a root for
// young-generation GC: from then on each replaced table keeps its successor alive, which is promoted and
// keeps the next one, and each of them the calls it held — so every call's objects are promoted, until
// the next full GC, which starts the chain again. Measured (Node 20 and 24): a bare HTTP/2 client loop
// promoted ~1 KB per scavenge before its first full GC and 1.4 MB after, for good; with these tables
// 1 KB throughout. The gateway under a payment-read loop, after its first full GC: 28 MB/s promoted
// and 0.27 ms of CPU per read, against 0.3 MB/s and 0.22 ms with them (payments 0.185 → 0.156 ms).
//
// These tables keep streams by id in a plain object's elements and members in an array: neither links
// a replaced store to the next. They are given to each HTTP/2 session (by its first use) and each
// grpc-js transport (when it connects), and do what the Map and Sets did there.
import { createRequire } from "node:module";
import { connect } from "node:http2";
import { Duplex } from "node:stream";
import { types } from "node:util";
import type { Logger } from "../logger.js";

type Visit<K, V> = (value: V, key: K, table: unknown) => void;

/** A Map from HTTP/2 stream id to stream, for the uses Node makes of it: get, set, delete, size, forEach. */
export class StreamsById<V> {
  #byId: Record<number, V> = Object.create(null) as Record<number, V>;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  has(id: number): boolean {
    return this.#byId[id] !== undefined;
  }

  get(id: number): V | undefined {
    return this.#byId[id];
  }

  set(id: number, value: V): this {
    if (this.#byId[id] === undefined) this.#size++;
    this.#byId[id] = value;
    return this;
  }

  delete(id: number): boolean {
    if (this.#byId[id] === undefined) return false;
    delete this.#byId[id];
    this.#size--;
    return true;
  }

  /** In id order (the order streams were opened); the callback may delete (a destroyed stream leaves). */
  forEach(visit: Visit<number, V>): void {
    for (const [id, value] of this) visit(value, id, this);
  }

  *[Symbol.iterator](): IterableIterator<[number, V]> {
    for (const key of Object.keys(this.#byId)) {
      const value = this.#byId[Number(key)];
      if (value !== undefined) yield [Number(key), value];
    }
  }
}

/** A Set of objects (streams, calls), each knowing its place: add, delete and has in constant time. */
export class Members<T extends object> {
  readonly #items: T[] = [];
  /** Each member's index in #items, on the member itself (a symbol of this set alone). */
  readonly #at = Symbol("index");

  constructor(from?: Iterable<T>) {
    if (from) for (const item of from) this.add(item);
  }

  get size(): number {
    return this.#items.length;
  }

  has(item: T): boolean {
    const at = (item as Record<symbol, number | undefined>)[this.#at];
    return at !== undefined && this.#items[at] === item;
  }

  add(item: T): this {
    if (this.has(item)) return this;
    (item as Record<symbol, number | undefined>)[this.#at] = this.#items.length;
    this.#items.push(item);
    return this;
  }

  delete(item: T): boolean {
    if (!this.has(item)) return false;
    const index = (item as Record<symbol, number>)[this.#at]!;
    const last = this.#items.pop()!;
    if (last !== item) {
      this.#items[index] = last;
      (last as Record<symbol, number>)[this.#at] = index;
    }
    (item as Record<symbol, number | undefined>)[this.#at] = undefined;
    return true;
  }

  /** Over the members as they were when it began: the callback may delete. */
  forEach(visit: Visit<T, T>): void {
    for (const item of [...this.#items]) visit(item, item, this);
  }

  [Symbol.iterator](): IterableIterator<T> {
    return [...this.#items][Symbol.iterator]();
  }

  values(): IterableIterator<T> {
    return this[Symbol.iterator]();
  }
}

interface SessionState {
  streams: { forEach(visit: (value: unknown, key: number) => void): void };
  pendingStreams: Iterable<object>;
}

/** Marks a session whose tables were given (a symbol shared by any copy of this module). */
const GIVEN = Symbol.for("switchyard.callTables.given");
/** Marks what was replaced, so that a second copy of this module leaves the first in place. */
const INSTALLED = Symbol.for("switchyard.callTables.installed");

/**
 * Node's Http2Session prototype and the symbols of the two members used here, read off a session
 * made on a socket that goes nowhere; undefined when Node has changed them (then nothing is replaced).
 */
function http2Internals(): { proto: Record<symbol, unknown>; state: symbol; updateTimer: symbol } | undefined {
  const probe = connect("http://probe.invalid", {
    createConnection: () =>
      new Duplex({
        read() {},
        write(_chunk, _encoding, done) {
          done();
        },
      }),
  });
  try {
    probe.on("error", () => {});
    const proto = Object.getPrototypeOf(Object.getPrototypeOf(probe)) as Record<symbol, unknown>;
    const state = Object.getOwnPropertySymbols(probe).find((s) => s.description === "state");
    const updateTimer = Object.getOwnPropertySymbols(proto).find((s) => s.description === "kUpdateTimer");
    const current = state && ((probe as unknown as Record<symbol, unknown>)[state] as Partial<SessionState>);
    const usable =
      updateTimer &&
      typeof proto[updateTimer] === "function" &&
      // Node's own (primordial) Map and Set: real ones, though not instances of the global classes.
      types.isMap(current?.streams) &&
      types.isSet(current?.pendingStreams);
    return usable ? { proto, state: state!, updateTimer } : undefined;
  } finally {
    probe.destroy();
  }
}

/** Each HTTP/2 session (client and server) gets its tables the first time it is used: before any stream. */
function installSessionTables(): boolean {
  const internals = http2Internals();
  if (!internals) return false;
  const { proto, state, updateTimer } = internals;
  const original = proto[updateTimer] as ((this: object) => unknown) & { [INSTALLED]?: true };
  if (original[INSTALLED]) return true;
  const updateTimerGivingTables = function (this: Record<symbol, unknown>) {
    if (this[GIVEN] === undefined) {
      this[GIVEN] = true;
      const sessionState = this[state] as SessionState;
      const streams = new StreamsById<unknown>();
      sessionState.streams.forEach((stream, id) => streams.set(id, stream));
      sessionState.streams = streams;
      sessionState.pendingStreams = new Members(sessionState.pendingStreams);
    }
    return original.call(this);
  };
  Object.defineProperty(updateTimerGivingTables, INSTALLED, { value: true });
  proto[updateTimer] = updateTimerGivingTables;
  return true;
}

interface GrpcTransport {
  activeCalls: Iterable<object>;
}
interface GrpcConnector {
  prototype: { connect: ((...args: unknown[]) => Promise<GrpcTransport>) & { [INSTALLED]?: true } };
}

/** Each grpc-js transport gets its active-calls table when it connects (before it carries a call). */
function installTransportTables(): boolean {
  let connector: GrpcConnector | undefined;
  try {
    const require = createRequire(import.meta.url);
    connector = (require("@grpc/grpc-js/build/src/transport.js") as { Http2SubchannelConnector?: GrpcConnector })
      .Http2SubchannelConnector;
  } catch {
    return false;
  }
  const original = connector?.prototype.connect;
  if (!connector || typeof original !== "function") return false;
  if (original[INSTALLED]) return true;
  const connectGivingTables = function (this: unknown, ...args: unknown[]) {
    return original.apply(this, args).then((transport) => {
      if (types.isSet(transport.activeCalls)) transport.activeCalls = new Members(transport.activeCalls);
      return transport;
    });
  };
  Object.defineProperty(connectGivingTables, INSTALLED, { value: true });
  connector.prototype.connect = connectGivingTables;
  return true;
}

let installed: { sessions: boolean; transports: boolean } | undefined;

/** Gives every HTTP/2 session and grpc-js transport of this process its tables (once; what Node or grpc-js no longer has is left). */
export function installCallTables(): { sessions: boolean; transports: boolean } {
  installed ??= { sessions: installSessionTables(), transports: installTransportTables() };
  return installed;
}

/**
 * Says, as a process starts listening, what Node or grpc-js no longer has for the tables to replace:
 * without a table its calls are promoted after the first full GC (more CPU per call), which nothing else
 * would show. Silent when both are installed.
 */
export function warnIfCallTablesMissing(
  logger: Pick<Logger, "warn">,
  { sessions, transports } = installCallTables(),
): void {
  if (sessions && transports) return;
  const missing = [!sessions && "Node's HTTP/2 sessions", !transports && "grpc-js's transports"].filter(Boolean);
  logger.warn(
    { callTables: { sessions, transports }, node: process.versions.node },
    `call tables not installed in ${missing.join(" and ")}: their internals changed; calls may be promoted after a full GC (docs/operations.md#node-flags)`,
  );
}
