// Order contents, prices, totals and shipments, without I/O.
import { DomainError } from "@switchyard/platform/domain-error.js";
import { assertAmount, assertCurrency } from "@switchyard/platform/money.js";

export const MAX_QUANTITY = 10_000n;
export const MAX_ITEMS = 100;
/** As many discounts as items: each is a line of the order, and an order's answer stays bounded. */
export const MAX_DISCOUNTS = 100;
export const NOTE_MAX_LENGTH = 1_000;
/** The longest carrier and tracking number a shipment keeps. */
export const SHIPPING_FIELD_MAX = 100;

const SKU = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const CODE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
// Control characters other than tab and newline.
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f]/;

/** An item as a client asks for it: the price comes from the catalog. */
export interface RequestedItem {
  sku: string;
  quantity: bigint;
  /** The unit price the client expects to pay, when it says. */
  expectedUnitPrice: bigint | undefined;
}

/** An item as it is stored: priced. */
export interface NewItem {
  sku: string;
  quantity: bigint;
  unitPrice: bigint;
}

/** A catalog item's price. */
export interface CatalogPrice {
  price: bigint;
  currency: string;
}

export interface Totals {
  subtotal: bigint;
  discountTotal: bigint;
  total: bigint;
}

/** The shape of a requested item, before any price is known. */
export function validateItem(item: RequestedItem): RequestedItem {
  if (!SKU.test(item.sku))
    throw new DomainError("RULE_VIOLATION", "sku must be 1 to 64 letters, digits, '.', '_' or '-'", { field: "sku" });
  if (item.quantity < 1n || item.quantity > MAX_QUANTITY)
    throw new DomainError("RULE_VIOLATION", `quantity must be from 1 to ${MAX_QUANTITY}`, { field: "quantity" });
  if (item.expectedUnitPrice !== undefined) assertAmount(item.expectedUnitPrice, "unit_price", 0n);
  return item;
}

/**
 * Prices items from the catalog: an unknown sku or one sold in another currency than the order's
 * is refused (422); a price the client expected that is not the catalog's → 409 PRICE_CHANGED with
 * the current price, so the client can confirm it and send again.
 */
export function priceItems(
  items: readonly RequestedItem[],
  catalog: ReadonlyMap<string, CatalogPrice>,
  currency: string,
): NewItem[] {
  const priced = items.map((item) => {
    const entry = catalog.get(item.sku);
    if (!entry) throw new DomainError("UNKNOWN_SKU", `sku ${item.sku} is not in the catalog`, { sku: item.sku });
    if (entry.currency !== currency) {
      throw new DomainError(
        "CURRENCY_MISMATCH",
        `sku ${item.sku} is sold in ${entry.currency}, the order is in ${currency}`,
        { sku: item.sku, currency: entry.currency },
      );
    }
    if (item.expectedUnitPrice !== undefined && item.expectedUnitPrice !== entry.price) {
      throw new DomainError(
        "PRICE_CHANGED",
        `the price of ${item.sku} is ${entry.price} ${entry.currency}, not ${item.expectedUnitPrice}: confirm the current price and send again`,
        {
          sku: item.sku,
          unit_price: entry.price.toString(),
          currency: entry.currency,
        },
      );
    }
    return { sku: item.sku, quantity: item.quantity, unitPrice: entry.price };
  });
  assertAmount(totalsOf(priced, []).subtotal, "total", 0n);
  return priced;
}

export function validateNote(note: string): string {
  if (note.length > NOTE_MAX_LENGTH || CONTROL.test(note))
    throw new DomainError(
      "RULE_VIOLATION",
      `note must be at most ${NOTE_MAX_LENGTH} characters without control characters`,
      { field: "note" },
    );
  return note;
}

/** What a shipment says of itself: a carrier and a tracking number, each bounded. */
export function validateShipment<T extends { carrier: string; trackingNumber: string }>(shipment: T): T {
  if (shipment.carrier.length > SHIPPING_FIELD_MAX || shipment.trackingNumber.length > SHIPPING_FIELD_MAX) {
    const message = `carrier and tracking_number are at most ${SHIPPING_FIELD_MAX} characters`;
    throw new DomainError("RULE_VIOLATION", message, { field: "carrier" });
  }
  return shipment;
}

export function validateDiscountCode(code: string): string {
  if (!CODE.test(code))
    throw new DomainError("RULE_VIOLATION", "code must be 1 to 64 letters, digits, '.', '_' or '-'", { field: "code" });
  return code;
}

export function totalsOf(
  items: readonly { quantity: bigint; unitPrice: bigint }[],
  discounts: readonly { amount: bigint }[],
): Totals {
  const subtotal = items.reduce((sum, i) => sum + i.quantity * i.unitPrice, 0n);
  const discountTotal = discounts.reduce((sum, d) => sum + d.amount, 0n);
  return { subtotal, discountTotal, total: subtotal - discountTotal };
}

/** An order holds at most MAX_ITEMS items: room for one more. */
export function guardRoomForItem(items: readonly unknown[]): void {
  if (items.length >= MAX_ITEMS) {
    throw new DomainError("RULE_VIOLATION", `an order holds at most ${MAX_ITEMS} items`, { field: "items" });
  }
}

/** An order holds at most MAX_DISCOUNTS discounts: its answer (one message, one entry of a page) stays bounded. */
export function guardRoomForDiscount(discounts: readonly unknown[]): void {
  if (discounts.length >= MAX_DISCOUNTS)
    throw new DomainError("RULE_VIOLATION", `an order holds at most ${MAX_DISCOUNTS} discounts`, {
      field: "discounts",
    });
}

/** A discount may not take the total below zero. */
export function checkDiscount(totals: Totals, amount: bigint): void {
  assertAmount(amount, "amount");
  if (amount > totals.total)
    throw new DomainError("RULE_VIOLATION", `the discount of ${amount} exceeds the order total of ${totals.total}`, {
      field: "amount",
    });
}

/** A new order's currency and items, before pricing. */
export function validateNewOrder(currency: string, items: RequestedItem[]): RequestedItem[] {
  assertCurrency(currency);
  if (items.length > MAX_ITEMS)
    throw new DomainError("RULE_VIOLATION", `an order holds at most ${MAX_ITEMS} items`, { field: "items" });
  return items.map(validateItem);
}
