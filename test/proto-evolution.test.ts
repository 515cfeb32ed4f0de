// Binary schema evolution (contract §9) with real bytes and the real history of orders.proto. The
// older schema is orders.proto as it was before 7c5c110 (NewItem carried the client's unit_price = 3,
// Order had no step_in_progress), built with buf at test time; the newer one is gen/, what the
// services run today (NewItem: 3 and "unit_price" reserved, expected_unit_price = 4; Order: 16 added).
import { expect } from "chai";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { create, createFileRegistry, fromBinary, isFieldSet, toBinary, type DescMessage } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { NewItemSchema, OrderSchema, OrderStatus, OrderStep } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";

const require = createRequire(import.meta.url);
const ROOT = new URL("..", import.meta.url).pathname;
const BEFORE = join(ROOT, "test/fixtures/proto-evolution/orders-before-7c5c110");
const PROTO = "switchyard/orders/v1/orders.proto";

describe("binary schema evolution (orders.proto before and after 7c5c110)", () => {
  let OldOrder: DescMessage;
  let OldNewItem: DescMessage;

  before(() => {
    const work = mkdtempSync(join(tmpdir(), "switchyard-proto-evolution-"));
    try {
      const out = join(work, "before.binpb");
      const buf = join(dirname(require.resolve("@bufbuild/buf/package.json")), "bin", "buf");
      const run = spawnSync(buf, ["build", BEFORE, "--exclude-source-info", "-o", out], {
        encoding: "utf8",
        timeout: 30_000,
      });
      if (run.status !== 0) throw new Error(`buf build of the older orders.proto failed:\n${run.stderr}`);
      const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(out)));
      OldOrder = registry.getMessage("switchyard.orders.v1.Order")!;
      OldNewItem = registry.getMessage("switchyard.orders.v1.NewItem")!;
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });

  it("uses orders.proto exactly as it was before 7c5c110", function () {
    const git = spawnSync("git", ["show", `7c5c110^:proto/${PROTO}`], { cwd: ROOT, encoding: "utf8" });
    if (git.status !== 0) this.skip(); // a shallow clone has no such commit; the copy still stands
    expect(readFileSync(join(BEFORE, PROTO), "utf8")).to.equal(git.stdout);
    // And the two schemas differ where this test says they do.
    expect(OldNewItem.fields.map((f) => [f.number, f.name])).to.deep.equal([
      [1, "sku"],
      [2, "quantity"],
      [3, "unit_price"],
    ]);
    expect(NewItemSchema.fields.map((f) => [f.number, f.name])).to.deep.equal([
      [1, "sku"],
      [2, "quantity"],
      [4, "expected_unit_price"],
    ]);
    expect(OldOrder.fields.map((f) => f.number)).to.not.include(16);
  });

  describe("newer writer, older reader: unknown numbers are skipped", () => {
    it("an Order with step_in_progress (16) reads with every known field intact, 16 kept as an unknown field", () => {
      const bytes = toBinary(
        OrderSchema,
        create(OrderSchema, {
          id: 7n,
          userId: 3n,
          status: OrderStatus.PENDING,
          currency: "EUR",
          total: 2500n,
          note: "gift",
          items: [{ id: 1n, sku: "SKU-1", quantity: 2n, unitPrice: 1250n }],
          stepInProgress: OrderStep.PAYMENT,
        }),
      );
      const old = fromBinary(OldOrder, bytes) as Record<string, unknown>;
      expect(old).to.include({
        id: 7n,
        userId: 3n,
        status: OrderStatus.PENDING,
        currency: "EUR",
        total: 2500n,
        note: "gift",
      });
      expect((old.items as Record<string, unknown>[])[0]).to.include({
        id: 1n,
        sku: "SKU-1",
        quantity: 2n,
        unitPrice: 1250n,
      });
      expect(old).to.not.have.property("stepInProgress");
      // protobuf-es keeps what it skipped: field 16, varint, value 1 (ORDER_STEP_PAYMENT).
      expect(old.$unknown).to.deep.equal([{ no: 16, wireType: WireType.Varint, data: new Uint8Array([1]) }]);
      // ...and writes it back, so an older service passing the message on loses nothing: the same bytes.
      const again = toBinary(OldOrder, old as never);
      expect(again).to.deep.equal(bytes);
      const passedOn = fromBinary(OrderSchema, again);
      expect(passedOn.stepInProgress).to.equal(OrderStep.PAYMENT);
      expect(passedOn.total).to.equal(2500n);
    });

    it("a NewItem's expected_unit_price (4) never lands in the old unit_price (3): it is unknown to the old reader", () => {
      const bytes = toBinary(
        NewItemSchema,
        create(NewItemSchema, { sku: "SKU-1", quantity: 2n, expectedUnitPrice: 1250n }),
      );
      const old = fromBinary(OldNewItem, bytes) as Record<string, unknown>;
      expect(old).to.include({ sku: "SKU-1", quantity: 2n, unitPrice: 0n });
      expect(old.$unknown).to.have.length(1);
      expect((old.$unknown as { no: number }[])[0]!.no).to.equal(4);
    });
  });

  describe("older writer, newer reader: missing fields read as defaults", () => {
    it("an Order without step_in_progress reads as ORDER_STEP_UNSPECIFIED (0), not set", () => {
      const bytes = toBinary(
        OldOrder,
        create(OldOrder, { id: 7n, status: OrderStatus.PAID, currency: "EUR", total: 2500n }),
      );
      const order = fromBinary(OrderSchema, bytes);
      expect(order).to.include({ id: 7n, status: OrderStatus.PAID, currency: "EUR", total: 2500n });
      expect(order.stepInProgress).to.equal(OrderStep.UNSPECIFIED);
      expect(isFieldSet(order, OrderSchema.field.stepInProgress)).to.equal(false);
      // Every other field the old writer left out reads as its type's default too.
      expect(order).to.include({ userId: 0n, note: "", paymentId: "", refundId: "" });
      expect(order.shipments).to.deep.equal([]);
      expect(order.createTime).to.equal(undefined);
      expect(order.$unknown).to.equal(undefined);
    });

    it("an old client's NewItem with unit_price (3): no expectation set, the reserved 3 read into nothing", () => {
      const bytes = toBinary(OldNewItem, create(OldNewItem, { sku: "SKU-1", quantity: 2n, unitPrice: 1250n }));
      const item = fromBinary(NewItemSchema, bytes);
      expect(item).to.include({ sku: "SKU-1", quantity: 2n });
      // `optional`: absent is "no expected price" (the catalog's price applies), not 0.
      expect(item.expectedUnitPrice).to.equal(undefined);
      expect(isFieldSet(item, NewItemSchema.field.expectedUnitPrice)).to.equal(false);
      expect(item.$unknown?.map((u) => u.no)).to.deep.equal([3]);
    });
  });
});
