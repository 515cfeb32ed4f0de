// The keyset page every list reads (paging.ts: its cursor): at most `limit` rows of the list in its
// order, from its start or past the position (created_at, id) a cursor names — never an offset, so a
// page deep in the list costs what the first does on the list's index (…, created_at, id).
//
// A list's two statements (its first page, a page after a cursor) are built once, when its store is
// loaded: each keeps one text, so it stays one named prepared statement (postgres-database.ts) with
// its plan; a call brings only its parameters.
import type { Keyset } from "../paging.js";
import type { SqlExecutor } from "./engine.js";

/** Newest first (a cursor names the rows before it), or oldest first (the rows after it). */
export type KeysetOrder = "newest first" | "oldest first";

export interface KeysetPageSpec {
  /** `SELECT <columns> FROM <table>`: the list's rows, without conditions, order or limit. */
  select: string;
  /** The list's conditions, joined by AND, with their parameters $1…$n (the keyset's and the limit follow). */
  where: string;
  order: KeysetOrder;
}

/** Which page: after the position a cursor names (undefined: the first), and how many rows at most. */
export interface KeysetPage {
  after: Keyset | undefined;
  limit: number;
}

/** The highest `$n` in a statement: how many parameters it takes. */
const parametersOf = (sql: string): number => Math.max(0, ...[...sql.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));

/** One list's keyset page: its two statements, built once. */
export class KeysetPageQuery {
  /** The first page's statement, and the one of a page after a cursor. */
  readonly firstPage: string;
  readonly pageAfter: string;

  constructor(spec: KeysetPageSpec) {
    const n = parametersOf(spec.where);
    const [direction, past] = spec.order === "newest first" ? ["DESC", "<"] : ["ASC", ">"];
    const orderBy = `ORDER BY created_at ${direction}, id ${direction}`;
    this.firstPage = `${spec.select} WHERE ${spec.where} ${orderBy} LIMIT $${n + 1}`;
    this.pageAfter = `${spec.select} WHERE ${spec.where} AND (created_at, id) ${past} ($${n + 1}, $${n + 2}) ${orderBy} LIMIT $${n + 3}`;
  }

  /** The page's rows; `params` are the list's own ($1…$n of its conditions). */
  async rows<R>(db: SqlExecutor, params: readonly unknown[], page: KeysetPage): Promise<R[]> {
    const { after, limit } = page;
    const { rows } = after
      ? await db.query<R>(this.pageAfter, [...params, after.createdAt, after.id, limit])
      : await db.query<R>(this.firstPage, [...params, limit]);
    return rows;
  }
}
