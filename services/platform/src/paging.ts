// The keyset cursor every list uses: a page is tied to the position (created_at, id) of its last
// row, never to an offset, so its cost does not grow with depth and inserts do not shift it.
import { fail } from "./errors.js";
import { MAX_PAGE_BYTES } from "./message-limits.js";

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

export interface Keyset {
  createdAt: Date;
  id: string;
}

interface CursorBody {
  v: 1;
  /** Which list (and whose): a cursor from another list is refused, never misread. */
  c: string;
  t: number;
  i: string;
}

/** 0 (unset) means the default; anything outside 1..100 is refused. */
export function pageSizeOf(requested: number): number {
  if (requested === 0) return DEFAULT_PAGE_SIZE;
  if (!Number.isInteger(requested) || requested < 1 || requested > MAX_PAGE_SIZE) {
    throw fail("INVALID_REQUEST", `page size must be between 1 and ${MAX_PAGE_SIZE}`);
  }
  return requested;
}

export function encodeCursor(collection: string, key: Keyset): string {
  const body: CursorBody = { v: 1, c: collection, t: key.createdAt.getTime(), i: key.id };
  return Buffer.from(JSON.stringify(body)).toString("base64url");
}

const ID_SHAPES = {
  /** Opaque text ids (pay_…, post_…). */
  text: /^[A-Za-z0-9_-]{1,64}$/,
  /** bigint ids (users, orders). */
  number: /^[1-9][0-9]{0,17}$/,
};
// Within what both a JS Date and PostgreSQL's timestamptz hold without surprises (years 1970–9999).
const MAX_TIME_MS = 253_402_300_799_999;

/** The position a cursor names, or undefined for the first page. Malformed or foreign → 400. */
export function decodeCursor(
  collection: string,
  token: string,
  ids: keyof typeof ID_SHAPES = "text",
): Keyset | undefined {
  if (token === "") return undefined;
  const { c, key } = readCursor(token, ids);
  if (c !== collection) throw fail("INVALID_CURSOR", "the cursor belongs to another list");
  return key;
}

/** A non-empty cursor's list and position, its shape checked. */
function readCursor(token: string, ids: keyof typeof ID_SHAPES): { c: string; key: Keyset } {
  let body: Partial<CursorBody>;
  try {
    if (token.length > 512 || !/^[A-Za-z0-9_-]+$/.test(token)) throw new Error("shape");
    const parsed: unknown = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
    if (typeof parsed !== "object" || parsed === null) throw new Error("shape");
    body = parsed;
  } catch {
    throw fail("INVALID_CURSOR", "the cursor is malformed");
  }
  // A forged position must not reach SQL: a time out of range or an id of the wrong shape is malformed.
  if (
    body.v !== 1 ||
    typeof body.c !== "string" ||
    typeof body.t !== "number" ||
    !Number.isSafeInteger(body.t) ||
    body.t < 0 ||
    body.t > MAX_TIME_MS ||
    typeof body.i !== "string" ||
    !ID_SHAPES[ids].test(body.i)
  ) {
    throw fail("INVALID_CURSOR", "the cursor is malformed");
  }
  return { c: body.c, key: { createdAt: new Date(body.t), id: body.i } };
}

/** Whether position `a` comes after `b` in a list's order (created_at, then id). */
export function keysetAfter(a: Keyset, b: Keyset): boolean {
  const at = a.createdAt.getTime();
  const bt = b.createdAt.getTime();
  return at > bt || (at === bt && a.id > b.id);
}

/**
 * Whether `cursor` names a position after `after`'s, both cursors of one list — for a reader that
 * holds positions from two streams of the same list (the gateway's shared feed beside a subscriber's
 * own) without knowing the list's name. Malformed, empty or of two lists → INVALID_CURSOR.
 */
export function cursorAfter(cursor: string, after: string, ids: keyof typeof ID_SHAPES = "text"): boolean {
  if (cursor === "" || after === "") throw fail("INVALID_CURSOR", "the cursor is malformed");
  const a = readCursor(cursor, ids);
  const b = readCursor(after, ids);
  if (a.c !== b.c) throw fail("INVALID_CURSOR", "the cursor belongs to another list");
  return keysetAfter(a.key, b.key);
}

/** A page's bound in bytes: each row's encoded size (an estimate that is never below it), and the most a page may hold. */
export interface PageBytes<T> {
  bytesOf(row: T): number;
  /** MAX_PAGE_BYTES unless said. */
  max?: number;
}

/** The list a page is of: its name in cursors, each row's position, and (optionally) its bound in bytes. */
export interface PagedList<T> {
  collection: string;
  keyOf: (row: T) => Keyset;
  bytes?: PageBytes<T> | undefined;
}

/**
 * Splits rows fetched with `LIMIT size + 1` into a page and the cursor of the next one
 * ("" on the last page). With `bytes`, the page also ends before its items would pass that many
 * bytes — it always holds one — and the cursor continues right after its last item, so a client
 * that follows it sees every row once.
 */
export function pageOf<T>(rows: T[], size: number, list: PagedList<T>): { items: T[]; nextCursor: string } {
  const { collection, keyOf, bytes } = list;
  let count = Math.min(rows.length, size);
  if (bytes && count > 1) {
    const max = bytes.max ?? MAX_PAGE_BYTES;
    let total = bytes.bytesOf(rows[0] as T);
    for (let i = 1; i < count; i++) {
      total += bytes.bytesOf(rows[i] as T);
      if (total > max) {
        count = i;
        break;
      }
    }
  }
  if (count === rows.length) return { items: rows, nextCursor: "" };
  const items = rows.slice(0, count);
  return { items, nextCursor: encodeCursor(collection, keyOf(items[count - 1] as T)) };
}
