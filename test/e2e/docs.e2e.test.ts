// The API reference at /docs, served by the gateway process (dist/gateway.js, as in production; alone,
// since /docs and the documents need no upstream): over HTTP (the pages, their Content-Security-Policy,
// the assets and nothing else), then in headless Chromium (Debian's chromium driven by playwright-core):
// every published version's page renders every operation of its document, and the browser asks for
// nothing outside the gateway's origin. Screenshots are kept under .artifacts/docs/.
import { randomBytes } from "node:crypto";
import { expect } from "chai";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { createRequire } from "node:module";
import { createServer, type AddressInfo } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parse as parseYaml } from "yaml";
import type { Browser } from "playwright-core";
import { DOCS_CSP, REDOC_ASSET, docsPathOf } from "@switchyard/gateway/docs.js";
import { NODE_FLAGS, SERVICES } from "../../scripts/mesh.js";
import { Api, expectError, type ApiResponse } from "../support/http.js";

const ROOT = new URL("../..", import.meta.url).pathname;
const OPENAPI_DIR = join(ROOT, "gateway", "openapi");
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const ARTIFACTS = join(ROOT, ".artifacts", "docs");
const METHODS = ["get", "put", "post", "delete", "patch", "head", "options"];

/** A version's document as its file says (gateway/openapi/<version>.yaml), and its operations as "METHOD /path". */
function documentOf(version: string): { document: Record<string, any>; operations: string[] } {
  const document = parseYaml(readFileSync(join(OPENAPI_DIR, `${version}.yaml`), "utf8")) as Record<string, any>;
  const operations = Object.entries(document.paths as Record<string, Record<string, unknown>>)
    .flatMap(([path, item]) => METHODS.filter((m) => item[m]).map((m) => `${m.toUpperCase()} ${path}`))
    .sort();
  return { document, operations };
}

/** A request sent with its path exactly as written (fetch would resolve "../" before sending). */
function rawGet(baseUrl: string, path: string): Promise<ApiResponse> {
  const { hostname, port } = new URL(baseUrl);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, path, method: "GET" }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        const headers = new Headers(
          Object.entries(res.headers).flatMap(([k, v]) =>
            v === undefined ? [] : [[k, String(v)] as [string, string]],
          ),
        );
        resolve({ status: res.statusCode!, headers, text, json, ms: performance.now() - started });
      });
    });
    req.on("error", reject);
    req.end();
  });
}

/**
 * The gateway process on its own, on a socket bound here (LISTEN_FD, as the mesh launcher does). Its
 * upstreams point at a port nobody serves: it starts without identity (after a short wait) and
 * answers /docs and /<version>/openapi.json itself.
 */
async function startGatewayAlone(): Promise<{ url: string; logs: string[]; stop(): Promise<void> }> {
  const socket = createServer();
  await new Promise<void>((resolve) => socket.listen({ host: "127.0.0.1", port: 0, exclusive: true }, resolve));
  const port = (socket.address() as AddressInfo).port;
  const nowhere = "127.0.0.1:1";
  const logs: string[] = [];
  let child: ChildProcess;
  try {
    child = spawn(process.execPath, [...NODE_FLAGS, SERVICES.gateway], {
      cwd: ROOT,
      env: {
        ...process.env,
        GATEWAY_PORT: String(port),
        LISTEN_FD: "3",
        IDENTITY_ADDRESS: nowhere,
        PAYMENTS_ADDRESS: nowhere,
        ORDERS_ADDRESS: nowhere,
        CONTENT_ADDRESS: nowhere,
        REDIS_URL: "",
        LOG_LEVEL: "warn",
        GATEWAY_SERVICE_SECRET: randomBytes(32).toString("base64url"),
      },
      stdio: ["ignore", "pipe", "pipe", (socket as unknown as { _handle: { fd: number } })._handle.fd],
    });
  } finally {
    socket.close();
  }
  child.stdout!.setEncoding("utf8").on("data", (d: string) => logs.push(d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => logs.push(d));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    await exited;
  };
  for (const until = Date.now() + 30_000; Date.now() < until; await sleep(100)) {
    if (child.exitCode !== null) throw new Error(`the gateway exited (code ${child.exitCode}):\n${logs.join("")}`);
    if (
      (await fetch(`${url}/readyz`).then(
        (r) => r.status,
        () => 0,
      )) === 200
    )
      return { url, logs, stop };
  }
  await stop();
  throw new Error(`the gateway did not become ready:\n${logs.join("")}`);
}

describe("e2e: the API reference at /docs", function () {
  this.timeout(60_000);
  let gateway: Awaited<ReturnType<typeof startGatewayAlone>>;
  let api: Api;
  /** What the gateway publishes, by its own list (GET /versions): v1, v2, … */
  let published: string[];

  before(async () => {
    gateway = await startGatewayAlone();
    api = new Api(gateway.url);
    const listed = await api.get("/versions");
    expect(listed.status, listed.text).to.equal(200);
    const versions = listed.json.versions as { version: string; docs: string; openapi: string }[];
    for (const v of versions) {
      expect(v.docs, "/versions names each version's page").to.equal(docsPathOf(v.version));
      expect(v.openapi).to.equal(`/${v.version}/openapi.json`);
    }
    published = versions.map((v) => v.version);
  });
  after(async () => gateway?.stop());

  describe("over HTTP", () => {
    it("publishes every document in gateway/openapi/, and the gateway serves each at /<version>/openapi.json", async () => {
      const files = readdirSync(OPENAPI_DIR)
        .filter((f) => f.endsWith(".yaml"))
        .map((f) => f.replace(/\.yaml$/, ""))
        .sort();
      expect([...published].sort(), "GET /versions against gateway/openapi/*.yaml").to.deep.equal(files);
      for (const version of published) {
        const res = await api.get(`/${version}/openapi.json`);
        expect(res.status, `/${version}/openapi.json: ${res.text.slice(0, 200)}`).to.equal(200);
        expect(res.json).to.deep.equal(documentOf(version).document);
      }
    });

    it("/docs: an HTML index linking every version's page and document, with a strict CSP, outside the quotas", async () => {
      for (const path of ["/docs", "/docs/"]) {
        const res = await api.get(path, { headers: { accept: "text/html" } });
        expect(res.status, res.text.slice(0, 200)).to.equal(200);
        expect(res.headers.get("content-type")).to.equal("text/html; charset=utf-8");
        expect(res.headers.get("content-security-policy")).to.equal(DOCS_CSP);
        expect(res.headers.get("x-content-type-options")).to.equal("nosniff");
        expect(res.headers.get("x-ratelimit-limit"), "no quota is drawn on").to.equal(null);
        for (const version of published) {
          expect(res.text).to.include(`href="${docsPathOf(version)}"`);
          expect(res.text).to.include(`href="/${version}/openapi.json"`);
        }
        // Nothing from elsewhere: every URL the page names is a path on this origin (or an inline data: icon).
        const urls = [...res.text.matchAll(/\b(?:href|src|action)="([^"]*)"/g)].map((m) => m[1]!);
        expect(urls.filter((u) => !u.startsWith("/") && u !== "data:,")).to.deep.equal([]);
      }
      const csp = Object.fromEntries(DOCS_CSP.split("; ").map((d) => [d.split(" ")[0], d.split(" ").slice(1)]));
      expect(csp["default-src"]).to.deep.equal(["'none'"]);
      expect(csp["script-src"], "no inline script, no eval").to.deep.equal(["'self'"]);
      expect(csp["connect-src"]).to.deep.equal(["'self'"]);
      expect(csp["frame-ancestors"]).to.deep.equal(["'none'"]);
    });

    it("each version's page loads Redoc and its document from the gateway itself", async () => {
      for (const version of published) {
        const res = await api.get(docsPathOf(version));
        expect(res.status).to.equal(200);
        expect(res.headers.get("content-security-policy")).to.equal(DOCS_CSP);
        expect(res.text).to.include(`data-spec-url="/${version}/openapi.json"`);
        expect(res.text).to.include(`<script src="${REDOC_ASSET}"></script>`);
        expect(res.text, "no inline script").to.not.match(/<script(?![^>]*\bsrc=)[^>]*>/);
      }
      const bundle = await api.get(REDOC_ASSET);
      expect(bundle.status).to.equal(200);
      expect(bundle.headers.get("content-type")).to.equal("text/javascript; charset=utf-8");
      const installed = readFileSync(
        createRequire(import.meta.url).resolve("redoc/bundles/redoc.standalone.js"),
        "utf8",
      );
      expect(bundle.text.length, "the installed package's bundle").to.be.within(
        installed.length - 200,
        installed.length,
      );
      expect(bundle.text).to.not.include("cdn.redoc.ly");
      // Revalidation: the same ETag → 304 with no body.
      const again = await api.get(REDOC_ASSET, { headers: { "if-none-match": bundle.headers.get("etag")! } });
      expect(again.status).to.equal(304);
      expect(again.text).to.equal("");
      const head = await api.request("HEAD", "/docs");
      expect(head.status).to.equal(200);
      expect(head.text).to.equal("");
    });

    it("anything else under /docs: 404 (or 405) with the JSON error body", async () => {
      expectError(await api.get("/docs/assets/unknown.js"), 404, "ROUTE_NOT_FOUND");
      expectError(await api.get("/docs/assets/redoc.standalone.js.map"), 404, "ROUTE_NOT_FOUND");
      expectError(await api.get("/docs/v0"), 404, "ROUTE_NOT_FOUND");
      const post = await api.post("/docs", { json: {} });
      expectError(post, 405, "METHOD_NOT_ALLOWED");
      expect(post.headers.get("allow")).to.equal("GET, HEAD");
    });

    it("no path leads out of the assets: traversal, encoded or not, is a 404", async () => {
      const attempts = [
        "/docs/assets/../../package.json",
        "/docs/assets/../../../../etc/passwd",
        "/docs/../package.json",
        "/docs/assets/..%2f..%2fpackage.json",
        "/docs/assets/%2e%2e/%2e%2e/package.json",
        "/docs/assets/%2E%2E%2F%2E%2E%2Fpackage.json",
        "/docs/assets/..\\..\\package.json",
        "/docs/assets//etc/passwd",
        "/docs/assets/redoc.standalone.js/../../../package.json",
        "/docs/assets/%00redoc.standalone.js",
      ];
      for (const path of attempts) {
        const res = await rawGet(gateway.url, path);
        expectError(res, 404, "ROUTE_NOT_FOUND");
        expect(res.text, path).to.not.match(/"workspaces"|root:/);
      }
    });
  });

  describe("in headless Chromium", function () {
    this.timeout(90_000);
    let browser: Browser | undefined;

    before(async function () {
      if (!existsSync(CHROMIUM)) {
        console.log(
          `      (browser test skipped: no Chromium at ${CHROMIUM}; apt-get install -y chromium, or set CHROMIUM_PATH)`,
        );
        return this.skip();
      }
      const { chromium } = await import("playwright-core");
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: ["--headless", "--no-sandbox", "--disable-gpu"],
      });
    });
    after(async () => browser?.close());

    it("renders every operation of every published version, asking nothing of any other origin", async () => {
      const origin = new URL(gateway.url).origin;
      const page = await browser!.newPage({ viewport: { width: 1280, height: 900 } });
      const requests: string[] = [];
      const problems: string[] = [];
      page.on("request", (r) => requests.push(r.url()));
      page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
      page.on("console", (m) => m.type() === "error" && problems.push(`console error: ${m.text()}`));
      page.on("response", (r) => r.status() >= 400 && problems.push(`${r.status()} for ${r.url()}`));
      // CSP refusals are reported to the page: any one means the policy and the renderer disagree.
      await page.addInitScript(
        "document.addEventListener('securitypolicyviolation', (e) => console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI))",
      );

      await page.goto(`${origin}/docs`);
      const links = (await page
        .locator("main.index a[href^='/docs/']")
        .evaluateAll((as) => as.map((a) => a.getAttribute("href")))) as string[];
      expect(links, "the index links every published version").to.deep.equal(published.map(docsPathOf));

      mkdirSync(ARTIFACTS, { recursive: true });
      for (const version of published) {
        await page.locator(`main.index a[href='${docsPathOf(version)}']`).click();
        await page.waitForURL(`${origin}${docsPathOf(version)}`);
        await page.locator("#redoc[data-state='rendered'], #redoc[data-state='failed']").waitFor({ timeout: 30_000 });
        expect(
          await page.locator("#redoc").getAttribute("data-state"),
          (await page.locator("#redoc").textContent()) ?? "",
        ).to.equal("rendered");
        // Redoc shows each operation as its verb beside its path.
        const rendered = await page
          .locator("#redoc .http-verb")
          .evaluateAll((verbs) =>
            verbs.map((v) => `${(v.textContent ?? "").toUpperCase()} ${v.nextElementSibling?.textContent ?? ""}`),
          );
        const { operations } = documentOf(version);
        expect(operations.length, `${version} has operations`).to.be.greaterThan(0);
        expect([...new Set(rendered)].sort(), `operations rendered at ${docsPathOf(version)}`).to.deep.equal(
          operations,
        );
        const text = await page.locator("#redoc").innerText();
        for (const path of new Set(operations.map((o) => o.split(" ")[1]!)))
          expect(text, `${version}: ${path}`).to.include(path);
        const shot = join(ARTIFACTS, `${version}.png`);
        await page.screenshot({ path: shot });
        console.log(`      (screenshot of ${docsPathOf(version)}: ${shot})`);
        await page.goto(`${origin}/docs`);
      }

      // blob: URLs (Redoc's search worker) belong to the origin that made them.
      const elsewhere = requests.filter((u) => !u.startsWith("data:") && new URL(u).origin !== origin);
      expect(elsewhere, "requests outside the gateway's origin").to.deep.equal([]);
      expect(requests.some((u) => u.endsWith(REDOC_ASSET))).to.equal(true);
      expect(problems).to.deep.equal([]);
      await page.close();
    });
  });
});
