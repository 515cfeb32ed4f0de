// Every answer a service sends fits the gRPC message limit every channel takes (MAX_MESSAGE_BYTES):
// the largest answer of each kind — every field at its limit, text in the widest UTF-8 a character
// of a JavaScript string takes (3 bytes: "€") — encoded for real. Posts and orders are large enough
// that a page of 100 would not fit a page's bound, so their pages end at MAX_PAGE_BYTES by an
// estimate that must never be below the encoded size; every other list's page of 100 is small.
import { expect } from "chai";
import { create, toBinary, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import {
  GetDocumentResponseSchema,
  GetImportJobResponseSchema,
  ListCatalogItemsResponseSchema,
  ListPostsResponseSchema,
  WatchPostsResponseSchema,
} from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import {
  GetOrderResponseSchema,
  ListUserOrdersResponseSchema,
} from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { ListUsersResponseSchema } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import {
  ListPaymentsResponseSchema,
  ListRefundsResponseSchema,
} from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { MAX_MESSAGE_BYTES, MAX_PAGE_BYTES } from "@switchyard/platform/message-limits.js";
import { MAX_AMOUNT } from "@switchyard/platform/money.js";
import { MAX_PAGE_SIZE, pageOf } from "@switchyard/platform/paging.js";
import {
  BODY_MAX_LENGTH,
  CATALOG_MAX_PAGE_SIZE,
  NAME_MAX_LENGTH,
  TITLE_MAX_LENGTH,
  validateText,
} from "@switchyard/content/domain/content.js";
import { MAX_JOB_ERRORS, MAX_LINE_MESSAGE_LENGTH } from "@switchyard/content/domain/imports.js";
import {
  catalogItemToProto,
  documentToProto,
  importJobToProto,
  postBytes,
  postKeyset,
  postToProto,
} from "@switchyard/content/proto-mapping.js";
import type { PostRecord } from "@switchyard/content/store/posts/port.js";
import { MAX_DISCOUNTS, MAX_ITEMS, MAX_QUANTITY, NOTE_MAX_LENGTH } from "@switchyard/orders/domain/orders.js";
import { SHIPPING_FIELD_MAX } from "@switchyard/orders/domain/orders.js";
import { orderBytes, orderToProto } from "@switchyard/orders/proto-mapping.js";
import type { OrderRecord } from "@switchyard/orders/store/port.js";
import {
  EMAIL_MAX_LENGTH,
  FAMILY_NAME_MAX_LENGTH,
  FULL_NAME_MAX_LENGTH,
  GIVEN_NAME_MAX_LENGTH,
} from "@switchyard/identity/domain/users.js";
import { userToProto } from "@switchyard/identity/proto-mapping.js";
import { REASON_MAX_LENGTH, SOURCE_MAX_LENGTH } from "@switchyard/payments/domain/payments.js";
import { REFERENCE_MAX_LENGTH } from "@switchyard/payments/domain/access.js";
import { paymentToProto, refundToProto } from "@switchyard/payments/proto-mapping.js";

/** n characters of 3 bytes each in UTF-8 (a surrogate pair is 4 bytes for 2 characters: less). */
const wide = (n: number) => "€".repeat(n);
const LATEST = new Date(253_402_300_799_999); // 9999-12-31T23:59:59.999Z: the longest timestamp
const MAX_ID = 2n ** 63n - 1n;
const TENANT = `t${"-".repeat(62)}`; // 63 characters, the longest tenant id
const opaque = (prefix: string) => `${prefix}_${"A".repeat(20)}`;
const encoded = <S extends DescMessage>(schema: S, init: MessageInitShape<S>) =>
  toBinary(schema, create(schema, init)).byteLength;

function largestPost(i = 0): PostRecord {
  const post = {
    id: opaque("post").slice(0, -3) + String(i).padStart(3, "0"),
    tenantId: TENANT,
    authorId: MAX_ID,
    title: wide(TITLE_MAX_LENGTH),
    body: wide(BODY_MAX_LENGTH),
    createdAt: new Date(LATEST.getTime() - i),
  };
  validateText(post); // a post content accepts
  return post;
}

function largestOrder(i = 0): OrderRecord {
  return {
    id: MAX_ID - BigInt(i),
    tenantId: TENANT,
    userId: MAX_ID,
    status: "cancelled",
    currency: "EUR",
    note: wide(NOTE_MAX_LENGTH),
    paymentId: opaque("pay"),
    refundId: opaque("re"),
    version: 2 ** 31 - 1,
    stepInProgress: "refund",
    createdAt: new Date(LATEST.getTime() - i),
    updatedAt: LATEST,
    items: Array.from({ length: MAX_ITEMS }, () => ({
      id: MAX_ID,
      sku: "S".repeat(64),
      quantity: MAX_QUANTITY,
      unitPrice: MAX_AMOUNT,
      createdAt: LATEST,
    })),
    discounts: Array.from({ length: MAX_DISCOUNTS }, () => ({
      id: MAX_ID,
      code: "C".repeat(64),
      amount: 1n,
      createdAt: LATEST,
    })),
    shipments: [
      {
        id: opaque("shp"),
        orderId: MAX_ID,
        carrier: wide(SHIPPING_FIELD_MAX),
        trackingNumber: wide(SHIPPING_FIELD_MAX),
        createdAt: LATEST,
      },
    ],
  };
}

describe("message limits: the largest answer of every kind fits what every channel accepts", () => {
  it("a post's estimate is never below its encoded size in a page, whatever its text", () => {
    const post = largestPost();
    const variants: PostRecord[] = [
      post,
      { ...post, title: "x", body: "" },
      { ...post, title: "😀".repeat(TITLE_MAX_LENGTH / 2), body: "😀".repeat(BODY_MAX_LENGTH / 2) },
      { ...post, body: "a".repeat(BODY_MAX_LENGTH) },
    ];
    for (const p of variants)
      expect(postBytes(p), `${p.body.length} characters`).to.be.at.least(
        encoded(ListPostsResponseSchema, { posts: [postToProto(p)] }),
      );
    expect(encoded(WatchPostsResponseSchema, { post: postToProto(post) }), "a post on the live feed").to.be.at.most(
      MAX_PAGE_BYTES,
    );
  });

  it("a page of the largest posts ends within MAX_PAGE_BYTES (100 of them would not fit a message at all)", () => {
    const rows = Array.from({ length: MAX_PAGE_SIZE + 1 }, (_, i) => largestPost(i));
    const unbounded = encoded(ListPostsResponseSchema, { posts: rows.slice(0, MAX_PAGE_SIZE).map(postToProto) });
    expect(unbounded, "the attack: a page of 100 without a byte bound").to.be.greaterThan(MAX_MESSAGE_BYTES);
    const page = pageOf(rows, MAX_PAGE_SIZE, {
      collection: "posts:t",
      keyOf: postKeyset,
      bytes: { bytesOf: postBytes },
    });
    const bytes = encoded(ListPostsResponseSchema, {
      posts: page.items.map(postToProto),
      nextPageToken: page.nextCursor,
    });
    expect(page.items.length).to.be.within(1, MAX_PAGE_SIZE - 1);
    expect(bytes).to.be.at.most(MAX_PAGE_BYTES + 1024);
  });

  it("an order's estimate is never below its encoded size, and a page of the largest orders ends within MAX_PAGE_BYTES", () => {
    const order = largestOrder();
    for (const o of [order, { ...order, items: [], discounts: [], shipments: [], note: "" }]) {
      expect(orderBytes(o)).to.be.at.least(encoded(ListUserOrdersResponseSchema, { orders: [orderToProto(o)] }));
    }
    expect(encoded(GetOrderResponseSchema, { order: orderToProto(order) }), "the largest order").to.be.at.most(
      MAX_PAGE_BYTES,
    );
    const rows = Array.from({ length: MAX_PAGE_SIZE + 1 }, (_, i) => largestOrder(i));
    const page = pageOf(rows, MAX_PAGE_SIZE, {
      collection: "orders:t:1",
      keyOf: (o) => ({ createdAt: o.createdAt, id: o.id.toString() }),
      bytes: { bytesOf: orderBytes },
    });
    const bytes = encoded(ListUserOrdersResponseSchema, {
      orders: page.items.map(orderToProto),
      nextPageToken: page.nextCursor,
    });
    expect(bytes).to.be.at.most(MAX_PAGE_BYTES + 1024);
  });

  it("a single resource, an import job with its errors, and a page of every other list fit within MAX_PAGE_BYTES", () => {
    const largest: Record<string, number> = {
      document: encoded(GetDocumentResponseSchema, {
        document: documentToProto({
          id: opaque("doc"),
          tenantId: TENANT,
          title: wide(TITLE_MAX_LENGTH),
          body: wide(BODY_MAX_LENGTH),
          version: 2 ** 31 - 1,
          createdAt: LATEST,
          updatedAt: LATEST,
        }),
      }),
      "import job": encoded(GetImportJobResponseSchema, {
        job: importJobToProto({
          id: opaque("imp"),
          tenantId: TENANT,
          createdBy: MAX_ID,
          status: "failed",
          received: 10_000,
          imported: 10_000,
          failed: 10_000,
          failureMessage: wide(MAX_LINE_MESSAGE_LENGTH),
          createdAt: LATEST,
          updatedAt: LATEST,
          errors: Array.from({ length: MAX_JOB_ERRORS }, (_, i) => ({
            line: 10_000 - i,
            code: "RULE_VIOLATION",
            message: wide(MAX_LINE_MESSAGE_LENGTH),
          })),
        }),
      }),
      "catalog page": encoded(ListCatalogItemsResponseSchema, {
        items: Array.from({ length: CATALOG_MAX_PAGE_SIZE }, () =>
          catalogItemToProto({
            sku: "S".repeat(64),
            name: wide(NAME_MAX_LENGTH),
            price: MAX_AMOUNT,
            currency: "EUR",
            updatedAt: LATEST,
          }),
        ),
        page: 1_000_000,
        pageSize: CATALOG_MAX_PAGE_SIZE,
        total: BigInt(Number.MAX_SAFE_INTEGER),
      }),
      "users page": encoded(ListUsersResponseSchema, {
        users: Array.from({ length: MAX_PAGE_SIZE }, () =>
          userToProto({
            id: MAX_ID,
            tenantId: TENANT,
            email: "e".repeat(EMAIL_MAX_LENGTH),
            fullName: wide(FULL_NAME_MAX_LENGTH),
            givenName: wide(GIVEN_NAME_MAX_LENGTH),
            familyName: wide(FAMILY_NAME_MAX_LENGTH),
            role: "admin",
            passwordHash: "",
            internalRiskScore: 0,
            createdAt: LATEST,
          }),
        ),
        nextPageToken: "c".repeat(512),
      }),
      "payments page": encoded(ListPaymentsResponseSchema, {
        payments: Array.from({ length: MAX_PAGE_SIZE }, () =>
          paymentToProto({
            id: opaque("pay"),
            tenantId: TENANT,
            amount: MAX_AMOUNT,
            currency: "EUR",
            source: wide(SOURCE_MAX_LENGTH),
            amountRefunded: MAX_AMOUNT,
            ownerUserId: MAX_ID,
            reference: "r".repeat(REFERENCE_MAX_LENGTH),
            createdAt: LATEST,
          }),
        ),
        nextPageToken: "c".repeat(512),
      }),
      "refunds page": encoded(ListRefundsResponseSchema, {
        refunds: Array.from({ length: MAX_PAGE_SIZE }, () =>
          refundToProto({
            id: opaque("re"),
            tenantId: TENANT,
            paymentId: opaque("pay"),
            amount: MAX_AMOUNT,
            currency: "EUR",
            reason: wide(REASON_MAX_LENGTH),
            createdAt: LATEST,
          }),
        ),
        nextPageToken: "c".repeat(512),
      }),
    };
    for (const [what, bytes] of Object.entries(largest)) expect(bytes, what).to.be.at.most(MAX_PAGE_BYTES);
  });
});
