// Conditional requests (RFC 9110 §13): one reading of If-None-Match for every answer with an ETag.

/** RFC 9110 §13.1.2: does an If-None-Match list name this tag (weak comparison), or is it `*`? */
export function noneMatchHits(header: unknown, etag: string): boolean {
  if (typeof header !== "string") return false;
  const strip = (t: string) => t.trim().replace(/^W\//, "");
  return header.split(",").some((t) => t.trim() === "*" || strip(t) === strip(etag));
}
