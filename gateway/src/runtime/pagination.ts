// The list representation shared by every cursor list: {items, next_cursor} and a Link header.
import type { RouteResult } from "./route.js";

export function listResult<T>(path: string, limit: unknown, items: T[], nextCursor: string): RouteResult {
  const headers: Record<string, string> = {};
  if (nextCursor) {
    const query = new URLSearchParams();
    if (typeof limit === "number") query.set("limit", String(limit));
    query.set("cursor", nextCursor);
    headers.link = `<${path}?${query.toString()}>; rel="next"`;
  }
  return { status: 200, body: { items, next_cursor: nextCursor || null }, headers };
}

/** The page size to ask for: 0 lets the service apply its default. */
export function pageSizeParam(limit: unknown): number {
  return typeof limit === "number" ? limit : 0;
}

export function cursorParam(cursor: unknown): string {
  return typeof cursor === "string" ? cursor : "";
}
