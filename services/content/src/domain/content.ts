// Rules for documents, posts and catalog items, without I/O.
import { hash } from "node:crypto";
import { DomainError } from "@switchyard/platform/domain-error.js";
import { assertAmount, assertCurrency } from "@switchyard/platform/money.js";

export const TITLE_MAX_LENGTH = 200;
export const BODY_MAX_LENGTH = 60_000;
export const NAME_MAX_LENGTH = 200;

// Control characters other than tab, newline and carriage return.
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/;
const SKU = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export function validateText(input: { title: string; body: string }): { title: string; body: string } {
  const title = input.title.trim();
  if (title.length === 0 || title.length > TITLE_MAX_LENGTH || CONTROL.test(title)) {
    throw new DomainError(
      "RULE_VIOLATION",
      `title must be 1 to ${TITLE_MAX_LENGTH} characters without control characters`,
      { field: "title" },
    );
  }
  if (input.body.length > BODY_MAX_LENGTH || CONTROL.test(input.body)) {
    throw new DomainError(
      "RULE_VIOLATION",
      `body must be at most ${BODY_MAX_LENGTH} characters without control characters`,
      { field: "body" },
    );
  }
  return { title, body: input.body };
}

/** The strong entity tag of a stored version: opaque, quoted, different for every save. */
export function entityTag(documentId: string, version: number): string {
  // One-shot hashing: a Hash object per read cost the document read path several µs (issue 15).
  return `"${hash("sha256", `${documentId}:${version}`, "base64url").slice(0, 27)}"`;
}

/**
 * A conditional save (If-Match, non-empty): `*`, or one of its tags the current version's; otherwise
 * ETAG_MISMATCH, with the current version's tag to reconcile against.
 */
export function checkIfMatch(ifMatch: string, current: { id: string; version: number }): void {
  const tags = ifMatch.split(",").map((t) => t.trim());
  if (!tags.includes("*") && !tags.includes(entityTag(current.id, current.version))) {
    const message = "the document has changed since that entity tag: fetch it again and reconcile";
    throw new DomainError("ETAG_MISMATCH", message, { current_etag: entityTag(current.id, current.version) });
  }
}

export interface CatalogItemInput {
  sku: string;
  name: string;
  price: bigint;
  currency: string;
}

/** The reason an imported item is refused, or undefined when it is fine. */
export function catalogItemProblem(item: CatalogItemInput): string | undefined {
  if (!SKU.test(item.sku)) return "sku must be 1 to 64 letters, digits, '.', '_' or '-'";
  if (item.name.trim().length === 0 || item.name.length > NAME_MAX_LENGTH || CONTROL.test(item.name))
    return `name must be 1 to ${NAME_MAX_LENGTH} characters`;
  try {
    assertAmount(item.price, "price", 0n);
    assertCurrency(item.currency);
  } catch (err) {
    return err instanceof DomainError ? err.message : String(err);
  }
  return undefined;
}

/** The most skus one BatchGetCatalogItems call may name (an order's most items). */
export const MAX_BATCH_SKUS = 100;

/** The skus asked for, each once in the order first asked; malformed ones can name nothing and are refused. */
export function batchSkus(skus: readonly string[]): string[] {
  if (skus.length > MAX_BATCH_SKUS) throw new DomainError("INVALID_REQUEST", `at most ${MAX_BATCH_SKUS} skus per call`);
  for (const sku of skus)
    if (!SKU.test(sku)) throw new DomainError("INVALID_REQUEST", "a sku is 1 to 64 letters, digits, '.', '_' or '-'");
  return [...new Set(skus)];
}

/**
 * The global catalog is written only by admins of the tenant that owns it (CATALOG_OWNER_TENANT;
 * none: nobody writes it).
 */
export function requireCatalogOwner(caller: { tenantId: string; role: string }, ownerTenant: string | undefined): void {
  if (ownerTenant === undefined || caller.tenantId !== ownerTenant)
    throw new DomainError("TENANT_MISMATCH", "the catalog is written only by admins of the tenant that owns it");
  if (caller.role !== "admin") throw new DomainError("ROLE_REQUIRED", "this action needs the admin role");
}

export const CATALOG_DEFAULT_PAGE_SIZE = 20;
export const CATALOG_MAX_PAGE_SIZE = 100;

export function catalogPage(page: number, pageSize: number): { page: number; pageSize: number } {
  const p = page === 0 ? 1 : page;
  const size = pageSize === 0 ? CATALOG_DEFAULT_PAGE_SIZE : pageSize;
  if (p < 1 || p > 1_000_000) throw new DomainError("INVALID_REQUEST", "page must be from 1");
  if (size < 1 || size > CATALOG_MAX_PAGE_SIZE)
    throw new DomainError("INVALID_REQUEST", `page_size must be from 1 to ${CATALOG_MAX_PAGE_SIZE}`);
  return { page: p, pageSize: size };
}
