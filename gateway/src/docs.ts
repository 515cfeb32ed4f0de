// The API reference at /docs: an index of every published version and, at /docs/<version>, that
// version's document (/<version>/openapi.json) rendered by Redoc. Everything comes from the gateway
// itself — Redoc's standalone bundle is read from the installed `redoc` package (a production
// dependency, so the image has it) — and a strict Content-Security-Policy keeps the page to its own
// origin. Like /healthz it is outside /v1: no token, no quota, no concurrency limit (static bytes).
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { edgeError } from "./runtime/errors.js";
import { sendError } from "./runtime/respond.js";
import { noneMatchHits } from "./runtime/conditional.js";

/**
 * Only the page's own origin. Besides 'self':
 * - style-src 'unsafe-inline': Redoc styles itself at run time (styled-components writes <style>
 *   elements, and rendered descriptions carry style attributes); no script may run inline.
 * - worker-src blob: Redoc builds its search index in a Web Worker made from a Blob of its own code.
 * - img-src data: the icons Redoc's styles embed as data: URLs.
 */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "worker-src blob:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

/** Where each page lives. */
export const DOCS_PATH = "/docs";
export const docsPathOf = (version: string): string => `${DOCS_PATH}/${version}`;
export const REDOC_ASSET = `${DOCS_PATH}/assets/redoc.standalone.js`;
/** Where the gateway serves a version's document (the page has Redoc fetch it from there). */
export const documentPathOf = (version: string): string => `/${version}/openapi.json`;

/**
 * Redoc's sidebar footer always renders Redocly's logo from their CDN: the one request the page would
 * make elsewhere (and CSP would refuse). It gets an empty src instead, which loads nothing; Redoc then
 * drops the image and keeps its "API docs by Redocly" link.
 */
const EXTERNAL_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg";

/** Starts Redoc on #redoc once both scripts are in (no inline script: CSP allows none). */
const INIT_SCRIPT = `// Renders the document named by #redoc's data-spec-url with Redoc; data-state says when it is done.
(function () {
  var root = document.getElementById("redoc");
  var url = root.getAttribute("data-spec-url");
  Redoc.init(url, { scrollYOffset: "nav.versions" }, root, function (err) {
    if (err) {
      root.setAttribute("data-state", "failed");
      root.textContent = "The document " + url + " could not be rendered: " + (err && err.message ? err.message : String(err));
    } else {
      root.setAttribute("data-state", "rendered");
    }
  });
})();
`;

const STYLES = `body { margin: 0; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
nav.versions { position: sticky; top: 0; z-index: 10; display: flex; gap: 1rem; align-items: center;
  height: 2.75rem; padding: 0 1rem; background: #263238; color: #fff; }
nav.versions a { color: #fff; text-decoration: none; padding: 0.25rem 0.5rem; border-radius: 4px; }
nav.versions a[aria-current="page"] { background: #32329f; }
nav.versions .title { font-weight: 600; margin-right: 1rem; }
main.index { max-width: 48rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.5; }
main.index li { margin: 0.5rem 0; }
`;

interface Asset {
  readonly body: Buffer;
  readonly type: string;
  readonly etag: string;
}

function asset(body: string | Buffer, type: string): Asset {
  const bytes = typeof body === "string" ? Buffer.from(body, "utf8") : body;
  return { body: bytes, type, etag: `"${createHash("sha256").update(bytes).digest("base64url").slice(0, 27)}"` };
}

const escapeHtml = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);

/** A published version, as the gateway loaded it. */
export interface DocsVersion {
  /** `v1`, … */
  readonly version: string;
  /** `current`, `deprecated`, … (shown beside it). */
  readonly status?: string;
  /** Its OpenAPI document, served at /<version>/openapi.json. */
  readonly document: Readonly<Record<string, unknown>>;
}

/** The Redoc bundle, read from the installed package (found from this file, the same from src/ and dist/). */
export function readRedocBundle(): string {
  const file = new URL(import.meta.resolve("redoc/bundles/redoc.standalone.js"));
  return (
    readFileSync(file, "utf8")
      .replaceAll(EXTERNAL_LOGO, "")
      // Its source map is not served (and would not match the line above any more).
      .replace(/\n\/\/# sourceMappingURL=\S+\s*$/, "\n")
  );
}

function page(
  title: string,
  versions: readonly { version: string }[],
  current: string | undefined,
  main: string,
): string {
  const links = versions
    .map(
      (v) =>
        `<a href="${docsPathOf(v.version)}"${v.version === current ? ' aria-current="page"' : ""}>${escapeHtml(v.version)}</a>`,
    )
    .join("\n    ");
  return `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <meta name="referrer" content="no-referrer">
  <link rel="icon" href="data:,">
  <title>${escapeHtml(title)}</title>
  <link rel="stylesheet" href="${DOCS_PATH}/assets/docs.css">
</head>
<body>
  <nav class="versions" aria-label="API versions">
    <a class="title" href="${DOCS_PATH}">Switchyard API reference</a>
    ${links}
  </nav>
${main}
</body>
</html>
`;
}

export interface DocsSite {
  /** Whether the path is the docs' (the gateway hands every such request to serve). */
  handles(pathname: string): boolean;
  serve(req: IncomingMessage, res: ServerResponse, pathname: string): void;
}

/** The pages and assets, built once when the gateway starts (a missing Redoc package fails the start). */
export function createDocsSite(published: readonly DocsVersion[], redocBundle: string = readRedocBundle()): DocsSite {
  const versions = published.map(({ version, status, document }) => {
    if (!/^v[1-9][0-9]*$/.test(version)) throw new Error(`not an API version: ${version}`);
    const info = (document.info ?? {}) as { title?: unknown; version?: unknown };
    const title = `${String(info.title ?? "Switchyard API")} ${String(info.version ?? "")}`.trim();
    return { version, title, status, documentPath: documentPathOf(version) };
  });
  const html = (text: string) => asset(text, "text/html; charset=utf-8");
  const files = new Map<string, Asset>();
  const index = html(
    page(
      "Switchyard API reference",
      versions,
      undefined,
      `  <main class="index">
    <h1>Switchyard API reference</h1>
    <p>Every published version of the public API:</p>
    <ul>
${versions.map((v) => `      <li><a href="${docsPathOf(v.version)}">${escapeHtml(v.version)}</a>${v.status ? ` (${escapeHtml(v.status)})` : ""} — ${escapeHtml(v.title)} (<a href="${v.documentPath}">OpenAPI document</a>)</li>`).join("\n")}
    </ul>
  </main>`,
    ),
  );
  files.set(DOCS_PATH, index);
  files.set(`${DOCS_PATH}/`, index);
  for (const v of versions) {
    files.set(
      docsPathOf(v.version),
      html(
        page(
          `${v.title} (${v.version}) — API reference`,
          versions,
          v.version,
          `  <div id="redoc" data-spec-url="${v.documentPath}" data-state="loading"></div>
  <script src="${REDOC_ASSET}"></script>
  <script src="${DOCS_PATH}/assets/docs.js"></script>`,
        ),
      ),
    );
  }
  files.set(REDOC_ASSET, asset(redocBundle, "text/javascript; charset=utf-8"));
  files.set(`${DOCS_PATH}/assets/docs.js`, asset(INIT_SCRIPT, "text/javascript; charset=utf-8"));
  files.set(`${DOCS_PATH}/assets/docs.css`, asset(STYLES, "text/css; charset=utf-8"));

  return {
    handles: (pathname) => pathname === DOCS_PATH || pathname.startsWith(`${DOCS_PATH}/`),
    serve(req, res, pathname) {
      req.resume();
      const method = req.method ?? "GET";
      if (method !== "GET" && method !== "HEAD") {
        return sendError(
          res,
          edgeError("METHOD_NOT_ALLOWED", `${method} is not allowed here; allowed: GET, HEAD`, { allow: "GET, HEAD" }),
          false,
        );
      }
      // Only the files above, by exact path: nothing else is ever read, so no path leads out.
      const file = files.get(pathname);
      if (!file) return sendError(res, edgeError("ROUTE_NOT_FOUND", `no route for ${pathname.slice(0, 200)}`), false);
      const headers: Record<string, string | number> = {
        "content-type": file.type,
        etag: file.etag,
        // Revalidated every time (the ETag makes that a 304): an upgraded Redoc shows at once.
        "cache-control": "no-cache",
        "x-content-type-options": "nosniff",
        "content-security-policy": DOCS_CSP,
        "referrer-policy": "no-referrer",
      };
      if (noneMatchHits(req.headers["if-none-match"], file.etag)) {
        res.writeHead(304, headers);
        return void res.end();
      }
      res.writeHead(200, { ...headers, "content-length": file.body.length });
      res.end(method === "HEAD" ? undefined : file.body);
    },
  };
}
