// Order contents and totals, without I/O.
import { assertAmount, fail } from "@switchyard/platform";

export const MAX_QUANTITY = 10_000n;
export const MAX_ITEMS = 100;
export const NOTE_MAX_LENGTH = 1_000;

const SKU = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const CODE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
// Control characters other than tab and newline.
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f]/;

export interface NewItem {
  sku: string;
  quantity: bigint;
  unitPrice: bigint;
}

export interface Totals {
  subtotal: bigint;
  discountTotal: bigint;
  total: bigint;
}

export function validateItem(item: NewItem): NewItem {
  if (!SKU.test(item.sku)) throw fail("RULE_VIOLATION", "sku must be 1 to 64 letters, digits, '.', '_' or '-'", { field: "sku" });
  if (item.quantity < 1n || item.quantity > MAX_QUANTITY) throw fail("RULE_VIOLATION", `quantity must be from 1 to ${MAX_QUANTITY}`, { field: "quantity" });
  assertAmount(item.unitPrice, "unit_price", 0n);
  return item;
}

export function validateNote(note: string): string {
  if (note.length > NOTE_MAX_LENGTH || CONTROL.test(note)) throw fail("RULE_VIOLATION", `note must be at most ${NOTE_MAX_LENGTH} characters without control characters`, { field: "note" });
  return note;
}

export function validateDiscountCode(code: string): string {
  if (!CODE.test(code)) throw fail("RULE_VIOLATION", "code must be 1 to 64 letters, digits, '.', '_' or '-'", { field: "code" });
  return code;
}

export function totalsOf(items: readonly { quantity: bigint; unitPrice: bigint }[], discounts: readonly { amount: bigint }[]): Totals {
  const subtotal = items.reduce((sum, i) => sum + i.quantity * i.unitPrice, 0n);
  const discountTotal = discounts.reduce((sum, d) => sum + d.amount, 0n);
  return { subtotal, discountTotal, total: subtotal - discountTotal };
}

/** A discount may not take the total below zero. */
export function checkDiscount(totals: Totals, amount: bigint): void {
  assertAmount(amount, "amount");
  if (amount > totals.total) throw fail("RULE_VIOLATION", `the discount of ${amount} exceeds the order total of ${totals.total}`, { field: "amount" });
}

export function validateItems(items: NewItem[]): NewItem[] {
  if (items.length > MAX_ITEMS) throw fail("RULE_VIOLATION", `an order holds at most ${MAX_ITEMS} items`, { field: "items" });
  const total = totalsOf(items, []).subtotal;
  assertAmount(total, "total", 0n);
  return items.map(validateItem);
}
