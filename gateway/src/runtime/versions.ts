// The published major versions of the public API and how a request picks one (contract §9):
// public clients by path (/v1/…, /v2/…), internal consumers by media type on the same paths
// (Accept: application/vnd.api.v2+json). A v1 route whose representation changed in v2 announces
// its deprecation (RFC 9745 Deprecation, RFC 8594 Sunset, Link to the successor), and its use is
// counted per tenant and route so it can be watched before v1 is removed.
import type { Logger } from "@switchyard/platform/logger.js";
import { gatewayDeprecatedRequests } from "@switchyard/platform/metrics.js";
import { HTTP_STATUS, HttpError } from "./errors.js";

export interface PublishedVersion {
  major: number;
  status: "current" | "deprecated";
  /** When the version was deprecated (its successor published). */
  deprecatedAt?: Date;
  /** When it stops being served. */
  sunsetAt?: Date;
}

/** v2 was published, and v1 deprecated, on this day. */
export const V1_DEPRECATED_AT = new Date("2026-11-23T00:00:00Z");
/** The runway the contract gives clients: 6 to 12 months. */
export const SUNSET_MONTHS = { min: 6, max: 12, default: 9 } as const;

export function addMonths(date: Date, months: number): Date {
  const d = new Date(date);
  d.setUTCMonth(d.getUTCMonth() + months);
  return d;
}

/** Refuses a sunset outside the runway (a config error at start). */
export function checkSunset(sunset: Date, deprecatedAt: Date): void {
  if (sunset < addMonths(deprecatedAt, SUNSET_MONTHS.min) || sunset > addMonths(deprecatedAt, SUNSET_MONTHS.max)) {
    throw new Error(
      `expected a date ${SUNSET_MONTHS.min} to ${SUNSET_MONTHS.max} months after the deprecation (${deprecatedAt.toISOString().slice(0, 10)}), got ${sunset.toISOString().slice(0, 10)}`,
    );
  }
}

export function publishedVersions(v1SunsetAt: Date): PublishedVersion[] {
  return [
    { major: 1, status: "deprecated", deprecatedAt: V1_DEPRECATED_AT, sunsetAt: v1SunsetAt },
    { major: 2, status: "current" },
  ];
}

export const mediaTypeOf = (major: number): string => `application/vnd.api.v${major}+json`;

/** The body of GET /versions. */
export function versionsJson(versions: readonly PublishedVersion[]) {
  return {
    versions: versions.map((v) => ({
      version: `v${v.major}`,
      status: v.status,
      media_type: mediaTypeOf(v.major),
      openapi: `/v${v.major}/openapi.json`,
      docs: `/docs/v${v.major}`,
      deprecated_at: v.deprecatedAt?.toISOString() ?? null,
      sunset_at: v.sunsetAt?.toISOString() ?? null,
    })),
  };
}

export interface Negotiated {
  /** The representation to answer with (and read the body as). */
  major: number;
  /** Set when the client asked by media type: the Content-Type of the answer. */
  mediaType: string | undefined;
}

const VENDOR = /^application\/vnd\.api(?:\.(.*))?\+json$/i;

/** The vendor media ranges of an Accept (or Content-Type) header, with their q, malformed ones included. */
function vendorRanges(header: string): { version: string | undefined; q: number }[] {
  const ranges: { version: string | undefined; q: number }[] = [];
  for (const part of header.split(",")) {
    const [type = "", ...params] = part.split(";").map((p) => p.trim());
    const m = VENDOR.exec(type);
    if (!m) continue;
    const qParam = params.find((p) => /^q=/i.test(p));
    const q = qParam === undefined ? 1 : Number(qParam.slice(2));
    ranges.push({ version: m[1], q: Number.isFinite(q) ? q : 1 });
  }
  return ranges;
}

const mayNameVendorType = (header: string | undefined) => header !== undefined && /vnd\./i.test(header);

const majorOf = (version: string | undefined) =>
  version !== undefined && /^v[1-9]\d{0,2}$/i.test(version) ? Number(version.slice(1)) : undefined;

function notAcceptable(message: string, published: readonly number[]): HttpError {
  const accepted = published.map(mediaTypeOf).join(", ");
  return new HttpError(HTTP_STATUS.NOT_ACCEPTABLE, "NOT_ACCEPTABLE", `${message}; published: ${accepted}`, {
    details: { published: accepted },
  });
}

/**
 * Which version a request gets. On a path of version P, a vendor media type in Accept (or, without
 * one there, a published version named by Content-Type) picks the representation; an unknown or malformed one is refused with
 * 406 naming the published ones — unless Accept also takes plain JSON, which then gets P. A /v2 path
 * asked for another version by media type is refused too: the path says which version it is.
 */
export function negotiateVersion(
  pathMajor: number,
  accept: string | undefined,
  contentType: string | undefined,
  published: readonly number[],
): Negotiated {
  // Most requests name no vendor type at all: nothing to parse.
  if (!mayNameVendorType(accept) && !mayNameVendorType(contentType)) return { major: pathMajor, mediaType: undefined };
  const asked = vendorRanges(accept ?? "").filter((r) => r.q > 0);
  // A body's Content-Type counts only when it names a published version: any other +json type is JSON.
  const fromBody =
    asked.length === 0
      ? vendorRanges(contentType ?? "").filter((r) => published.includes(majorOf(r.version) ?? 0))
      : [];
  const ranges = asked.length > 0 ? asked : fromBody;
  if (ranges.length === 0) return { major: pathMajor, mediaType: undefined };
  const known = ranges
    .map((r) => ({ major: majorOf(r.version), q: r.q }))
    .filter((r): r is { major: number; q: number } => r.major !== undefined && published.includes(r.major))
    .sort((a, b) => b.q - a.q || b.major - a.major);
  const chosen = known[0];
  if (!chosen) {
    // Plain JSON in the same Accept is a fallback the client allowed.
    if (asked.length > 0 && /(^|,)\s*(application\/json|application\/\*|\*\/\*)\s*(;|,|$)/i.test(accept ?? ""))
      return { major: pathMajor, mediaType: undefined };
    const named = ranges.map((r) => r.version ?? "(none)").join(", ");
    throw notAcceptable(`no published version matches the media type's version (${named})`, published);
  }
  if (pathMajor !== 1 && chosen.major !== pathMajor)
    throw notAcceptable(`this path is v${pathMajor}; ask for another version by its path`, published);
  return { major: chosen.major, mediaType: asked.length > 0 ? mediaTypeOf(chosen.major) : undefined };
}

/**
 * The operations each deprecated version deprecates: those whose representation (parameters, bodies,
 * responses) is not its successor's — a route that did not change is the same under both paths.
 */
export function deprecatedOperations(
  versions: readonly PublishedVersion[],
  representations: (major: number) => Map<string, string>,
): Map<number, { version: PublishedVersion; successor: number; operations: Set<string> }> {
  const out = new Map<number, { version: PublishedVersion; successor: number; operations: Set<string> }>();
  for (const version of versions.filter((v) => v.status === "deprecated")) {
    const successor = versions.find((v) => v.major === version.major + 1);
    if (!successor) continue;
    const next = representations(successor.major);
    const changed = [...representations(version.major)].filter(([id, r]) => next.get(id) !== r).map(([id]) => id);
    out.set(version.major, { version, successor: successor.major, operations: new Set(changed) });
  }
  return out;
}

/** RFC 9745 Deprecation (a structured-field date), RFC 8594 Sunset (an HTTP-date) and the Links. */
export function deprecationHeaders(version: PublishedVersion, successorPath: string): Record<string, string> {
  const headers: Record<string, string> = { ...datesOf(version) };
  headers.link = `<${successorPath}>; rel="successor-version", </versions>; rel="deprecation"; type="application/json"`;
  return headers;
}

// A version's dates are fixed: formatted once, not on every answer of its routes.
const formattedDates = new WeakMap<PublishedVersion, Record<string, string>>();
function datesOf(version: PublishedVersion): Record<string, string> {
  let dates = formattedDates.get(version);
  if (!dates) {
    dates = {};
    if (version.deprecatedAt) dates.deprecation = `@${Math.floor(version.deprecatedAt.getTime() / 1000)}`;
    if (version.sunsetAt) dates.sunset = version.sunsetAt.toUTCString();
    formattedDates.set(version, dates);
  }
  return dates;
}

/**
 * Counts uses of deprecated routes per tenant and route template — in the metrics
 * (switchyard_gateway_deprecated_requests_total{tenant, route}: tenants are bounded by the tenants
 * that exist, routes by the document) — and logs the counts every
 * interval (one line for all of them, not one per request), so usage can be watched before removal.
 */
/** Tenant and route pairs one usage line holds at most from callers without a token. */
const MAX_USAGE_ENTRIES = 1_000;

export class DeprecatedRouteUsage {
  private counts = new Map<string, { tenant: string; route: string; count: number }>();
  private readonly metricChildren = new Map<string, { inc(): void }>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly logger: Logger,
    intervalMs: number,
  ) {
    this.timer = setInterval(() => this.flush(), intervalMs).unref();
  }

  /** `verified`: the tenant is the verified caller's (else a path's, unbounded: the metric says "unauthenticated"). */
  count(tenant: string, route: string, verified = true): void {
    // Tenants named by a path are whatever a caller writes: past a bound, one line takes the rest.
    const named = verified || this.counts.size < MAX_USAGE_ENTRIES ? tenant : "(others, unauthenticated)";
    const key = `${named}\u0000${route}`;
    const entry = this.counts.get(key);
    if (entry) entry.count++;
    else this.counts.set(key, { tenant: named, route, count: 1 });
    // The metric's child per label pair, looked up once (labels() hashes its labels on every call).
    const metricKey = verified ? key : `\u0000${route}`;
    let child = this.metricChildren.get(metricKey);
    if (!child)
      this.metricChildren.set(
        metricKey,
        (child = gatewayDeprecatedRequests.labels({ tenant: verified ? tenant : "unauthenticated", route })),
      );
    child.inc();
  }

  flush(): void {
    if (this.counts.size === 0) return;
    const usage = [...this.counts.values()];
    this.counts = new Map();
    this.logger.info({ usage }, "deprecated routes used");
  }

  stop(): void {
    clearInterval(this.timer);
    this.flush();
  }
}
