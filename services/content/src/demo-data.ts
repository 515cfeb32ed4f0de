// Demo catalog for `npm start` on embedded storage only (never in deploy/).
import type { CatalogWriter } from "./catalog-import.js";

export const DEMO_CATALOG = [
  { sku: "BOOK-1", name: "The Pragmatic Switchyard", price: 1500n, currency: "EUR" },
  { sku: "MUG-1", name: "Switchyard mug", price: 900n, currency: "EUR" },
  { sku: "PEN-1", name: "Fountain pen", price: 2500n, currency: "EUR" },
  { sku: "SHIRT-1", name: "T-shirt (M)", price: 1900n, currency: "EUR" },
  { sku: "STICKER-1", name: "Sticker pack", price: 300n, currency: "EUR" },
];

export async function seedDemoCatalog(catalog: CatalogWriter): Promise<void> {
  for (const item of DEMO_CATALOG) await catalog.upsertCatalogItem(item);
}
