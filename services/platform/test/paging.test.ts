// The keyset cursor: its encoding, what it refuses, page sizes, page splitting, and paging a real
// table newest first while rows keep arriving.
import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import type { SqlDatabase } from "@switchyard/platform/store";
import { MAX_PAGE_BYTES } from "@switchyard/platform/message-limits.js";
import {
  cursorAfter,
  decodeCursor,
  DEFAULT_PAGE_SIZE,
  encodeCursor,
  MAX_PAGE_SIZE,
  pageOf,
  pageSizeOf,
  type Keyset,
} from "@switchyard/platform/paging.js";
import { forEachDatabase } from "./support/databases.js";

const COLLECTION = "payments:tenant-1";
const token = (body: unknown) => Buffer.from(JSON.stringify(body)).toString("base64url");

function reasonOf(call: () => unknown): string | undefined {
  let thrown: unknown;
  try {
    call();
  } catch (err) {
    thrown = err;
  }
  expect(thrown, "expected a ConnectError").to.be.instanceOf(ConnectError);
  expect((thrown as ConnectError).code).to.equal(Code.InvalidArgument);
  return errorInfoOf(thrown as ConnectError)?.reason;
}

describe("paging (keyset cursors)", () => {
  describe("encodeCursor / decodeCursor", () => {
    it("round-trips a position, in URL-safe characters", () => {
      const key: Keyset = { createdAt: new Date("2024-05-06T07:08:09.123Z"), id: "pay_AbC-_123" };
      const cursor = encodeCursor(COLLECTION, key);
      expect(cursor).to.match(/^[A-Za-z0-9_-]+$/);
      const back = decodeCursor(COLLECTION, cursor);
      expect(back?.id).to.equal(key.id);
      expect(back?.createdAt).to.be.instanceOf(Date);
      expect(back?.createdAt.getTime()).to.equal(key.createdAt.getTime());
    });

    it("reads the empty cursor as the first page", () => {
      expect(decodeCursor(COLLECTION, "")).to.equal(undefined);
    });

    it("refuses a cursor of another list with INVALID_CURSOR", () => {
      const cursor = encodeCursor("payments:tenant-2", { createdAt: new Date(), id: "pay_1" });
      expect(reasonOf(() => decodeCursor(COLLECTION, cursor))).to.equal("INVALID_CURSOR");
      const refunds = encodeCursor("refunds:pay_1", { createdAt: new Date(), id: "re_1" });
      expect(reasonOf(() => decodeCursor(COLLECTION, refunds))).to.equal("INVALID_CURSOR");
    });

    it("refuses garbage, oversized and non-base64url cursors with INVALID_CURSOR", () => {
      const now = Date.now();
      const bad: Record<string, string> = {
        "random letters": "hello",
        "random bytes": randomBytes(30).toString("base64url"),
        "not base64url (+ / =)": "ab+cd/ef==",
        padding: `${encodeCursor(COLLECTION, { createdAt: new Date(), id: "x" })}=`,
        spaces: "abc def",
        "non-ASCII": "çursör",
        "JSON null": token(null),
        "JSON number": token(42),
        "JSON string": token("cursor"),
        "JSON array": token([1, COLLECTION, now, "x"]),
        "empty object": token({}),
        "other version": token({ v: 2, c: COLLECTION, t: now, i: "x" }),
        "time as text": token({ v: 1, c: COLLECTION, t: String(now), i: "x" }),
        "fractional time": token({ v: 1, c: COLLECTION, t: now + 0.5, i: "x" }),
        "time beyond any Date": token({ v: 1, c: COLLECTION, t: 9e15, i: "x" }),
        "id not a string": token({ v: 1, c: COLLECTION, t: now, i: 7 }),
        "no collection": token({ v: 1, t: now, i: "x" }),
        oversized: encodeCursor(COLLECTION, { createdAt: new Date(), id: "x".repeat(600) }),
      };
      for (const [what, cursor] of Object.entries(bad)) {
        expect(
          reasonOf(() => decodeCursor(COLLECTION, cursor)),
          what,
        ).to.equal("INVALID_CURSOR");
      }
    });
  });

  describe("cursorAfter (two positions of one list, in its order)", () => {
    const at = (ms: number, id: string) => encodeCursor(COLLECTION, { createdAt: new Date(ms), id });

    it("orders by created_at, then by id — as the list's SQL and the live feed do", () => {
      expect(cursorAfter(at(2_000, "pay_a"), at(1_000, "pay_z"))).to.equal(true);
      expect(cursorAfter(at(1_000, "pay_z"), at(2_000, "pay_a"))).to.equal(false);
      expect(cursorAfter(at(1_000, "pay_b"), at(1_000, "pay_a"))).to.equal(true);
      expect(cursorAfter(at(1_000, "pay_a"), at(1_000, "pay_b"))).to.equal(false);
      expect(cursorAfter(at(1_000, "pay_a"), at(1_000, "pay_a")), "a position is not after itself").to.equal(false);
    });

    it("refuses an empty or malformed cursor, and two lists' cursors, with INVALID_CURSOR", () => {
      const other = encodeCursor("payments:tenant-2", { createdAt: new Date(1_000), id: "pay_a" });
      expect(reasonOf(() => cursorAfter(at(1_000, "pay_a"), other))).to.equal("INVALID_CURSOR");
      expect(reasonOf(() => cursorAfter("", at(1_000, "pay_a")))).to.equal("INVALID_CURSOR");
      expect(reasonOf(() => cursorAfter(at(1_000, "pay_a"), "hello"))).to.equal("INVALID_CURSOR");
    });
  });

  describe("pageSizeOf", () => {
    it(`reads 0 (unset) as the default of ${DEFAULT_PAGE_SIZE}`, () => {
      expect(pageSizeOf(0)).to.equal(20);
    });

    it(`accepts 1..${MAX_PAGE_SIZE} as given`, () => {
      for (const size of [1, 2, 50, 99, 100]) expect(pageSizeOf(size)).to.equal(size);
    });

    it("refuses anything else with INVALID_REQUEST", () => {
      for (const size of [101, 1000, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
        expect(
          reasonOf(() => pageSizeOf(size)),
          String(size),
        ).to.equal("INVALID_REQUEST");
      }
    });
  });

  describe("pageOf", () => {
    const rows = (n: number) =>
      Array.from({ length: n }, (_, i) => ({ id: `r${i}`, createdAt: new Date(1_700_000_000_000 - i * 1000) }));
    const keyOf = (r: { id: string; createdAt: Date }): Keyset => r;

    it("with one row more than the page, returns the page and the cursor of its last row", () => {
      const page = pageOf(rows(4), 3, { collection: COLLECTION, keyOf });
      expect(page.items.map((r) => r.id)).to.deep.equal(["r0", "r1", "r2"]);
      const next = decodeCursor(COLLECTION, page.nextCursor);
      expect(next?.id).to.equal("r2");
      expect(next?.createdAt.getTime()).to.equal(1_700_000_000_000 - 2000);
    });

    it('on the last page returns every row and the cursor ""', () => {
      expect(pageOf(rows(3), 3, { collection: COLLECTION, keyOf })).to.deep.equal({ items: rows(3), nextCursor: "" });
      expect(pageOf(rows(1), 3, { collection: COLLECTION, keyOf })).to.deep.equal({ items: rows(1), nextCursor: "" });
      expect(pageOf([], 3, { collection: COLLECTION, keyOf })).to.deep.equal({ items: [], nextCursor: "" });
    });

    describe("bounded in bytes", () => {
      type Sized = { id: string; createdAt: Date; bytes: number };
      const sized = (sizes: number[]): Sized[] =>
        sizes.map((bytes, i) => ({
          id: `r${String(i).padStart(3, "0")}`,
          createdAt: new Date(1_700_000_000_000 - i * 1000),
          bytes,
        }));
      const keyOfSized = (r: Sized): Keyset => r;
      const bytes = (max?: number) => ({ bytesOf: (r: Sized) => r.bytes, ...(max !== undefined ? { max } : {}) });

      it("ends the page before its items would pass the bound, with the cursor of its last item", () => {
        const page = pageOf(sized([400, 400, 400, 400, 400]), 4, {
          collection: COLLECTION,
          keyOf: keyOfSized,
          bytes: bytes(1000),
        });
        expect(page.items.map((r) => r.id)).to.deep.equal(["r000", "r001"]);
        expect(decodeCursor(COLLECTION, page.nextCursor)?.id).to.equal("r001");
        // Exactly at the bound still fits.
        expect(
          pageOf(sized([500, 500, 1]), 3, { collection: COLLECTION, keyOf: keyOfSized, bytes: bytes(1000) }).items,
        ).to.have.length(2);
      });

      it("always holds one item, even one larger than the bound", () => {
        const page = pageOf(sized([5000, 10, 10]), 2, {
          collection: COLLECTION,
          keyOf: keyOfSized,
          bytes: bytes(1000),
        });
        expect(page.items.map((r) => r.id)).to.deep.equal(["r000"]);
        expect(decodeCursor(COLLECTION, page.nextCursor)?.id).to.equal("r000");
        expect(
          pageOf(sized([5000]), 2, { collection: COLLECTION, keyOf: keyOfSized, bytes: bytes(1000) }),
        ).to.deep.equal({
          items: sized([5000]),
          nextCursor: "",
        });
      });

      it(`is MAX_PAGE_BYTES (${MAX_PAGE_BYTES}) unless told, and changes nothing for pages within it`, () => {
        const large = pageOf(sized(Array<number>(101).fill(300 * 1024)), 100, {
          collection: COLLECTION,
          keyOf: keyOfSized,
          bytes: bytes(),
        });
        expect(large.items).to.have.length(3);
        expect(large.nextCursor).to.not.equal("");
        const small = pageOf(sized(Array<number>(101).fill(1024)), 100, {
          collection: COLLECTION,
          keyOf: keyOfSized,
          bytes: bytes(),
        });
        expect(small.items).to.have.length(100);
        expect(decodeCursor(COLLECTION, small.nextCursor)?.id).to.equal("r099");
        expect(pageOf(sized([10, 10]), 2, { collection: COLLECTION, keyOf: keyOfSized, bytes: bytes() })).to.deep.equal(
          {
            items: sized([10, 10]),
            nextCursor: "",
          },
        );
      });

      it("followed cursor by cursor, gives every row once, in order, whatever the rows' sizes", () => {
        let seed = 7;
        const random = () => (seed = (seed * 48_271) % 2_147_483_647) / 2_147_483_647;
        const all = sized(Array.from({ length: 300 }, () => Math.floor(random() * 2500)));
        const seen: string[] = [];
        let cursor = "";
        for (let pages = 0; pages < 300; pages++) {
          const after = decodeCursor(COLLECTION, cursor);
          const rest = after
            ? all.filter(
                (r) =>
                  r.createdAt.getTime() < after.createdAt.getTime() ||
                  (r.createdAt.getTime() === after.createdAt.getTime() && r.id < after.id),
              )
            : all;
          const page = pageOf(rest.slice(0, 21), 20, { collection: COLLECTION, keyOf: keyOfSized, bytes: bytes(4000) });
          expect(page.items.length, "a page is never empty").to.be.greaterThan(0);
          expect(
            page.items.reduce((sum, r) => sum + r.bytes, 0) <= 4000 || page.items.length === 1,
            "within the bound, or one item",
          ).to.equal(true);
          seen.push(...page.items.map((r) => r.id));
          cursor = page.nextCursor;
          if (cursor === "") break;
        }
        expect(cursor, "paging ended").to.equal("");
        expect(seen).to.deep.equal(all.map((r) => r.id));
      });
    });
  });
});

// created_at is kept to the millisecond (as the services' tables do): a cursor carries a JS Date,
// and a microsecond the Date cannot hold would make the next page skip rows.
const ENTRIES_SQL = `
  CREATE TABLE entries (
    id         text COLLATE "C" PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp()),
    original   boolean NOT NULL DEFAULT false
  );
  CREATE INDEX entries_by_created ON entries (created_at DESC, id DESC);`;

forEachDatabase("paging a table by keyset", (dbs) => {
  let db: SqlDatabase;
  before(async () => {
    db = await dbs.open([{ version: 1, name: "entries", sql: ENTRIES_SQL }]);
  });

  it("pages 250 rows newest first without duplicates or gaps while rows are inserted between pages", async () => {
    const base = new Date("2024-01-01T00:00:00.000Z");
    // 250 rows over 40 distinct instants: many rows share a created_at, so the id decides.
    await db.query(
      `INSERT INTO entries (id, created_at, original)
       SELECT md5(i::text), $1::timestamptz + (i % 40) * interval '1 millisecond', true FROM generate_series(1, 250) AS i`,
      [base],
    );
    const originals = (await db.query<{ id: string }>("SELECT id FROM entries WHERE original")).rows.map((r) => r.id);
    expect(originals).to.have.length(250);

    const collection = "entries:test";
    const size = 17;
    const seen: { id: string; createdAt: Date; original: boolean }[] = [];
    let cursor = "";
    let pages = 0;
    do {
      const after = decodeCursor(collection, cursor);
      const { rows } = after
        ? await db.query<{ id: string; created_at: Date; original: boolean }>(
            "SELECT id, created_at, original FROM entries WHERE (created_at, id) < ($1, $2) ORDER BY created_at DESC, id DESC LIMIT $3",
            [after.createdAt, after.id, size + 1],
          )
        : await db.query<{ id: string; created_at: Date; original: boolean }>(
            "SELECT id, created_at, original FROM entries ORDER BY created_at DESC, id DESC LIMIT $1",
            [size + 1],
          );
      const page = pageOf(rows, size, { collection, keyOf: (r) => ({ createdAt: r.created_at, id: r.id }) });
      if (page.nextCursor !== "") expect(page.items, `page ${pages}`).to.have.length(size);
      seen.push(...page.items.map((r) => ({ id: r.id, createdAt: r.created_at, original: r.original })));
      cursor = page.nextCursor;
      pages++;
      // Rows keep arriving: newer than everything, tied with an original's instant, and older.
      const tied = new Date(base.getTime() + (pages % 40));
      await db.query("INSERT INTO entries (id) VALUES ($1)", [`new-${pages}`]);
      await db.query("INSERT INTO entries (id, created_at) VALUES ($1, $2), ($3, $2)", [
        `tie-${pages}-0`,
        tied,
        `tie-${pages}-f`,
      ]);
      await db.query("INSERT INTO entries (id, created_at) VALUES ($1, $2)", [
        `old-${pages}`,
        new Date(base.getTime() - pages),
      ]);
    } while (cursor !== "" && pages < 100);

    expect(cursor, "paging ended").to.equal("");
    const seenOriginals = seen.filter((r) => r.original).map((r) => r.id);
    expect(new Set(seen.map((r) => r.id)).size, "no row seen twice").to.equal(seen.length);
    expect(seenOriginals.length, "every original row seen").to.equal(250);
    expect([...seenOriginals].sort()).to.deep.equal([...originals].sort());
    for (let i = 1; i < seen.length; i++) {
      const [prev, cur] = [seen[i - 1], seen[i]];
      if (!prev || !cur) continue;
      const newer =
        prev.createdAt.getTime() > cur.createdAt.getTime() ||
        (prev.createdAt.getTime() === cur.createdAt.getTime() && prev.id > cur.id);
      expect(newer, `row ${i} is older than row ${i - 1}`).to.equal(true);
    }
  });
});
