// Statements on embedded PGlite at the cost a server driver pays. PGlite's own query() makes six
// round trips into the WASM engine per statement (parse, describe, bind, describe, execute, sync)
// and re-parses the SQL every time; here each statement is parsed and described once, as a named
// prepared statement, and every later run is one round trip: bind + execute + sync.
// The caller holds PGlite's locks (see PgliteDatabase): this class only speaks the protocol.
import { parse as pgliteParse, protocol, type PGlite } from "@electric-sql/pglite";

type BackendMessage = Parameters<typeof pgliteParse.parseResults>[0][number];

interface PreparedStatement {
  /** "" for the unnamed statement (used once the cache is full). */
  readonly name: string;
  readonly paramTypes: readonly number[];
  /** The RowDescription of a statement that returns rows. */
  readonly rowDescription: BackendMessage | undefined;
}

export interface StatementResult<R> {
  rows: R[];
  /** As pg counts: the rows a statement returned, else the rows it changed. */
  rowCount: number;
  /** The command tag's verb (SELECT, INSERT, COMMIT, ROLLBACK, …). */
  command: string;
}

// Enough for every statement a service's code holds; SQL built at run time beyond it goes unnamed.
const MAX_PREPARED = 500;

function concat(parts: Uint8Array[]): Uint8Array {
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

export class PgliteStatements {
  private readonly prepared = new Map<string, PreparedStatement>();

  constructor(private readonly db: PGlite) {}

  /** Runs one statement with `$n` parameters. `inTransaction`: inside BEGIN … COMMIT (no file-system sync after it). */
  async run<R>(sql: string, params: readonly unknown[], inTransaction: boolean): Promise<StatementResult<R>> {
    const statement = this.prepared.get(sql) ?? (await this.prepare(sql, inTransaction));
    const values = params.map((value, i) => this.serialize(value, statement.paramTypes[i]!));
    const { messages } = await this.db.execProtocol(
      concat([protocol.serialize.bind({ statement: statement.name, values }), protocol.serialize.execute({}), protocol.serialize.sync()]),
      { syncToFs: !inTransaction },
    );
    const [result] = pgliteParse.parseResults(statement.rowDescription ? [statement.rowDescription, ...messages] : messages, this.db.parsers);
    const rows = (result?.rows ?? []) as R[];
    const command = (result as { command?: string } | undefined)?.command ?? "";
    return { rows, rowCount: statement.rowDescription ? rows.length : (result?.affectedRows ?? 0), command };
  }

  /** Runs a script of several statements without parameters (the simple query protocol). */
  async script(sql: string, inTransaction: boolean): Promise<void> {
    await this.db.execProtocol(concat([protocol.serialize.query(sql), protocol.serialize.sync()]), { syncToFs: !inTransaction });
  }

  private async prepare(sql: string, inTransaction: boolean): Promise<PreparedStatement> {
    const name = this.prepared.size < MAX_PREPARED ? `s${this.prepared.size + 1}` : "";
    const { messages } = await this.db.execProtocol(
      concat([protocol.serialize.parse({ name, text: sql }), protocol.serialize.describe({ type: "S", name }), protocol.serialize.sync()]),
      { syncToFs: !inTransaction },
    );
    const statement: PreparedStatement = {
      name,
      paramTypes: pgliteParse.parseDescribeStatementResults(messages),
      rowDescription: messages.find((m) => m.name === "rowDescription"),
    };
    if (name) this.prepared.set(sql, statement);
    return statement;
  }

  /** Text format, as PGlite's own query() sends parameters. */
  private serialize(value: unknown, type: number): string | null {
    if (value === null || value === undefined) return null;
    const serializer = this.db.serializers[type];
    return serializer ? serializer(value) : String(value);
  }
}
