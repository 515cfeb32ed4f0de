// The wire-protocol session with embedded PGlite, at the cost a server driver pays. PGlite's own
// query() makes six round trips into the WASM engine per statement (parse, describe, bind,
// describe, execute, sync), re-parses the SQL each time and decodes every reply with a general
// parser that copies each field. Here a statement is parsed and described once (a named prepared
// statement, as a server driver would keep), every later run is one round trip — bind + execute +
// sync, encoded here into one reused buffer — and the reply is read in place. The engine answers
// synchronously (execProtocolRawStream runs it to the reply's end before it returns), so a statement
// runs to its end without yielding: nothing can come between its parse and its run, and no promise
// is made per statement. NOTIFY payloads in any reply go to this session's LISTEN handlers. The
// caller holds the engine's lock (see PgliteDatabase): this class only speaks the protocol.
import { messages, protocol, type PGlite } from "@electric-sql/pglite";

interface Column {
  readonly name: string;
  readonly type: number;
}

interface PreparedStatement {
  /** "" for the unnamed statement (used once the cache is full). */
  readonly name: string;
  readonly paramTypes: readonly number[];
  /** Undefined for a statement that returns no rows. */
  readonly columns: readonly Column[] | undefined;
}

export interface StatementResult<R> {
  rows: R[];
  /** As pg counts: the rows a statement returned, else the rows it changed. */
  rowCount: number;
  /** The command tag's verb (SELECT, INSERT, COMMIT, ROLLBACK, …). */
  command: string;
}

/** One reply, read: the data rows (raw fields), the last command tag, the column and parameter descriptions. */
interface Reply {
  rows: (string | null)[][];
  tag: string;
  columns: Column[] | undefined;
  paramTypes: number[];
  /** ReadyForQuery came: the reply is whole. */
  ready: boolean;
}

// Enough for every statement a service's code holds; SQL built at run time beyond it goes unnamed.
const MAX_PREPARED = 500;
const utf8 = new TextDecoder();
/** Commands whose tag ends in the number of rows they changed. */
const COUNTED = new Set(["INSERT", "UPDATE", "DELETE", "MERGE", "COPY"]);

function concat(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  let length = 0;
  for (const p of parts) length += p.length;
  const out = new Uint8Array(length);
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

/** Execute (the unnamed portal, every row) and Sync: the same bytes after every Bind. */
const EXECUTE_SYNC = Uint8Array.of(0x45, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0x53, 0, 0, 0, 4);
/** Where each run's messages are written; the engine has read them when the exchange returns. */
let scratch = Buffer.allocUnsafe(1024);
/** The most the scratch buffer keeps: a run with larger values (a big document) gets a buffer of its own. */
const SCRATCH_MAX = 64 * 1024;

/**
 * Bind (the unnamed portal to statement `name`, every value as text, every column as text), then
 * Execute and Sync: the frontend messages of one run, in the scratch buffer.
 */
function bindExecuteSync(name: string, values: readonly (string | null)[]): Uint8Array {
  let length = 4 + 1 + Buffer.byteLength(name) + 1 + 2 + 2 + 2;
  for (const value of values) length += 4 + (value === null ? 0 : Buffer.byteLength(value));
  const size = 1 + length + EXECUTE_SYNC.length;
  if (scratch.length < size && size <= SCRATCH_MAX)
    scratch = Buffer.allocUnsafe(Math.min(SCRATCH_MAX, Math.max(size, 2 * scratch.length)));
  const out = size <= scratch.length ? scratch : Buffer.allocUnsafe(size);
  out[0] = 0x42; // B
  out.writeInt32BE(length, 1);
  let at = 5;
  out[at++] = 0; // the unnamed portal
  at += out.write(name, at);
  out[at++] = 0;
  out.writeInt16BE(0, at); // no parameter format codes: all text
  out.writeInt16BE(values.length, at + 2);
  at += 4;
  for (const value of values) {
    if (value === null) {
      out.writeInt32BE(-1, at);
      at += 4;
    } else {
      const bytes = out.write(value, at + 4);
      out.writeInt32BE(bytes, at);
      at += 4 + bytes;
    }
  }
  out.writeInt16BE(0, at); // no result format codes: all text
  at += 2;
  out.set(EXECUTE_SYNC, at);
  return out.subarray(0, at + EXECUTE_SYNC.length);
}

// ErrorResponse field codes → DatabaseError properties (as pg and PGlite name them).
const ERROR_FIELDS: Record<string, string> = {
  S: "severity",
  C: "code",
  D: "detail",
  H: "hint",
  P: "position",
  p: "internalPosition",
  q: "internalQuery",
  W: "where",
  s: "schema",
  t: "table",
  c: "column",
  d: "dataType",
  n: "constraint",
  F: "file",
  L: "line",
  R: "routine",
};

export class PgliteSession {
  private readonly prepared = new Map<string, PreparedStatement>();
  /** Names handed out so far. */
  private named = 0;
  private readonly listeners = new Map<string, Set<(payload: string) => void>>();

  constructor(private readonly db: PGlite) {}

  /** Runs one statement with `$n` parameters, to its end. */
  run<R>(sql: string, params: readonly unknown[]): StatementResult<R> {
    const statement = this.prepared.get(sql) ?? this.prepare(sql, this.named < MAX_PREPARED ? `s${++this.named}` : "");
    return this.execute<R>(statement, params);
  }

  private execute<R>(statement: PreparedStatement, params: readonly unknown[]): StatementResult<R> {
    const values = params.map((value, i) => this.serialize(value, statement.paramTypes[i]!));
    const reply = this.exchange(bindExecuteSync(statement.name, values));
    const command = reply.tag.split(" ", 1)[0]!;
    if (!statement.columns)
      return {
        rows: [],
        rowCount: COUNTED.has(command) ? Number(reply.tag.slice(reply.tag.lastIndexOf(" ") + 1)) : 0,
        command,
      };
    const rows = reply.rows.map((fields) => this.rowOf(statement.columns!, fields) as R);
    return { rows, rowCount: rows.length, command };
  }

  /** Runs a script of several statements without parameters (the simple query protocol). */
  script(sql: string): void {
    this.exchange(protocol.serialize.query(sql));
  }

  /** Calls `handler` with the payload of every NOTIFY on `channel` (after LISTEN, which the caller runs). */
  addListener(channel: string, handler: (payload: string) => void): () => boolean {
    let handlers = this.listeners.get(channel);
    if (!handlers) this.listeners.set(channel, (handlers = new Set()));
    handlers.add(handler);
    /** Removes the handler; true when it was the channel's last (time to UNLISTEN). */
    return () => {
      handlers.delete(handler);
      if (handlers.size > 0 || this.listeners.get(channel) !== handlers) return false;
      this.listeners.delete(channel);
      return true;
    };
  }

  /** Parses and describes `sql` under `name` ("": the unnamed statement, replaced by the next one). */
  private prepare(sql: string, name: string): PreparedStatement {
    const reply = this.exchange(
      concat([
        protocol.serialize.parse({ name, text: sql }),
        protocol.serialize.describe({ type: "S", name }),
        protocol.serialize.sync(),
      ]),
    );
    const statement: PreparedStatement = { name, paramTypes: reply.paramTypes, columns: reply.columns };
    if (name) this.prepared.set(sql, statement);
    return statement;
  }

  /** Sends frontend messages and reads the backend's reply; an ErrorResponse rejects (after the whole reply is read). */
  private exchange(frontend: Uint8Array): Reply {
    const chunks: Uint8Array[] = [];
    // execProtocolRawStream runs the engine synchronously, to the reply's end, before it returns: its
    // promise is settled by then (no filesystem sync after it: the filesystems this adapter opens,
    // Node's and memory, write as they go, and PGlite's sync of them only takes a lock of its own).
    // The engine hands out views into its own memory: each is copied before the next call reuses it.
    // (execProtocolRawSync alone would also decode every message with PGlite's general parser.)
    const settled = this.db.execProtocolRawStream(frontend, {
      syncToFs: false,
      onRawData: (data) => chunks.push(data.slice()),
    });
    // An engine that threw has answered nothing whole: that is the failure reported here.
    settled.catch(() => {});
    const reply = chunks.length > 0 ? this.read(concat(chunks)) : undefined;
    if (!reply?.ready)
      throw new Error(this.db.closed ? "the embedded engine is closed" : "the embedded engine did not answer");
    return reply;
  }

  private read(bytes: Uint8Array): Reply {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const reply: Reply = { rows: [], tag: "", columns: undefined, paramTypes: [], ready: false };
    let error: Error | undefined;
    let at = 0;
    const cstring = () => {
      const end = bytes.indexOf(0, at);
      const text = utf8.decode(bytes.subarray(at, end));
      at = end + 1;
      return text;
    };
    while (at + 5 <= bytes.length) {
      const code = bytes[at]!;
      const end = at + 1 + view.getInt32(at + 1);
      at += 5;
      switch (code) {
        case 0x44: {
          // D DataRow
          const count = view.getInt16(at);
          at += 2;
          const fields: (string | null)[] = new Array(count);
          for (let i = 0; i < count; i++) {
            const length = view.getInt32(at);
            at += 4;
            if (length < 0) fields[i] = null;
            else {
              fields[i] = utf8.decode(bytes.subarray(at, at + length));
              at += length;
            }
          }
          reply.rows.push(fields);
          break;
        }
        case 0x43: // C CommandComplete
          reply.tag = cstring();
          break;
        case 0x54: {
          // T RowDescription
          const count = view.getInt16(at);
          at += 2;
          const columns: Column[] = [];
          for (let i = 0; i < count; i++) {
            const name = cstring();
            columns.push({ name, type: view.getInt32(at + 6) });
            at += 18;
          }
          reply.columns = columns;
          break;
        }
        case 0x74: {
          // t ParameterDescription
          const count = view.getInt16(at);
          for (let i = 0; i < count; i++) reply.paramTypes.push(view.getInt32(at + 2 + 4 * i));
          break;
        }
        case 0x45: // E ErrorResponse: the first one is the statement's error
          error ??= this.errorOf(bytes.subarray(at, end));
          break;
        case 0x41: {
          // A NotificationResponse: process id, channel, payload
          at += 4;
          const channel = cstring();
          const payload = cstring();
          for (const handler of this.listeners.get(channel) ?? []) queueMicrotask(() => handler(payload));
          break;
        }
        case 0x5a: // Z ReadyForQuery
          reply.ready = true;
          break;
        // 1/2/3 Parse/Bind/CloseComplete, n NoData, N Notice, I EmptyQuery, s, S: nothing to keep.
      }
      at = end;
    }
    if (error) throw error;
    return reply;
  }

  private errorOf(fields: Uint8Array): Error {
    const values: Record<string, string> = {};
    let at = 0;
    while (at < fields.length && fields[at] !== 0) {
      const code = String.fromCharCode(fields[at]!);
      const end = fields.indexOf(0, at + 1);
      values[code] = utf8.decode(fields.subarray(at + 1, end));
      at = end + 1;
    }
    const error = new messages.DatabaseError(values.M ?? "database error", fields.length + 4, "error");
    for (const [code, property] of Object.entries(ERROR_FIELDS))
      if (values[code] !== undefined) (error as unknown as Record<string, string>)[property] = values[code];
    return error;
  }

  private rowOf(columns: readonly Column[], fields: (string | null)[]): Record<string, unknown> {
    const row: Record<string, unknown> = {};
    for (let i = 0; i < columns.length; i++) {
      const raw = fields[i]!;
      const { name, type } = columns[i]!;
      const parser = this.db.parsers[type];
      row[name] = raw === null ? null : parser ? parser(raw, type) : raw;
    }
    return row;
  }

  /** Text format, as PGlite's own query() sends parameters. */
  private serialize(value: unknown, type: number): string | null {
    if (value === null || value === undefined) return null;
    const serializer = this.db.serializers[type];
    return serializer ? serializer(value) : String(value);
  }
}
