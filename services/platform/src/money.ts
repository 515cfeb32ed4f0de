// Money rules shared by every service that handles amounts.
import { DomainError } from "./domain-error.js";

/** Largest amount accepted, in minor units: far below 2^53, so JSON numbers stay exact. */
export const MAX_AMOUNT = 100_000_000_000n;

const CURRENCIES = new Set(Intl.supportedValuesOf("currency"));

export function assertCurrency(currency: string): void {
  if (!/^[A-Z]{3}$/.test(currency) || !CURRENCIES.has(currency)) {
    throw new DomainError("RULE_VIOLATION", "currency must be an upper-case ISO 4217 code such as EUR", {
      field: "currency",
    });
  }
}

/** A whole number of minor units within [min, MAX_AMOUNT]. */
export function assertAmount(amount: bigint, field: string, min = 1n): void {
  if (amount < min || amount > MAX_AMOUNT) {
    throw new DomainError("RULE_VIOLATION", `${field} must be an integer in minor units from ${min} to ${MAX_AMOUNT}`, {
      field,
    });
  }
}
