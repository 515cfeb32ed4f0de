// A web app on another origin, in headless Chromium (Debian's chromium driven by playwright-core),
// against the real mesh: the page (test/e2e/browser-page/app.ts, bundled with esbuild, using
// @connectrpc/connect-web) logs in and reads across origins with fetch, calls a unary method and
// follows WatchPosts through /rpc with both the Connect and the gRPC-Web transport, and follows the SSE
// feed with fetch and a stream reader; a page from an origin that is not allowed is blocked by the
// browser. Screenshots are kept under .artifacts/browser/.
import { expect } from "chai";
import { existsSync, mkdirSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { build } from "esbuild";
import type { Browser } from "playwright-core";
import { startE2eMesh, type E2eMesh } from "../support/http.js";

const ROOT = new URL("../..", import.meta.url).pathname;
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const ARTIFACTS = join(ROOT, ".artifacts", "browser");

interface Outcome {
  check: string;
  ok: boolean;
  detail: string;
}

/** Serves the page and its bundle; the same server answers on 127.0.0.1 and on localhost — two origins. */
async function servePage(bundle: string): Promise<{ port: number; server: Server }> {
  const html = `<!doctype html><html><head><meta charset="utf-8"><title>Switchyard from another origin</title></head>
<body style="font: 14px sans-serif"><h1>A page on another origin</h1><p id="origin"></p><ol id="results"></ol>
<script>document.getElementById("origin").textContent = "origin: " + location.origin;</script>
<script type="module" src="/app.js"></script></body></html>`;
  const server = createServer((req, res) => {
    if (req.url === "/app.js")
      return res.writeHead(200, { "content-type": "text/javascript; charset=utf-8" }).end(bundle);
    if (req.url === "/") return res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(html);
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as AddressInfo).port, server };
}

describe("e2e: a page on another origin in Chromium (CORS, /rpc over Connect and gRPC-Web, the live feed)", function () {
  this.timeout(120_000);
  let env: E2eMesh | undefined;
  let browser: Browser | undefined;
  let page: { port: number; server: Server } | undefined;
  let allowedOrigin = "";

  before(async function () {
    if (!existsSync(CHROMIUM)) {
      console.log(
        `      (browser test skipped: no Chromium at ${CHROMIUM}; apt-get install -y chromium, or set CHROMIUM_PATH)`,
      );
      return this.skip();
    }
    this.timeout(180_000);
    const bundled = await build({
      entryPoints: [join(ROOT, "test/e2e/browser-page/app.ts")],
      bundle: true,
      write: false,
      format: "esm",
      platform: "browser",
      target: "chrome120",
      logLevel: "silent",
    });
    page = await servePage(bundled.outputFiles[0]!.text);
    allowedOrigin = `http://127.0.0.1:${page.port}`;
    // Only the page's 127.0.0.1 origin is allowed; the same page from localhost is another origin.
    env = await startE2eMesh("browser", { envFor: { gateway: { GATEWAY_CORS_ORIGINS: allowedOrigin } } });
    const { chromium } = await import("playwright-core");
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu"],
    });
    mkdirSync(ARTIFACTS, { recursive: true });
  });
  after(async function () {
    this.timeout(60_000);
    await browser?.close();
    page?.server.close();
    await env?.stop();
  });

  async function runIn(
    origin: string,
    fn: "switchyardRun" | "switchyardRunDisallowed",
    screenshot: string,
  ): Promise<Outcome[]> {
    const tab = await browser!.newPage();
    try {
      await tab.goto(`${origin}/`);
      await tab.waitForFunction((name) => typeof (globalThis as Record<string, unknown>)[name] === "function", fn);
      const outcomes = await tab.evaluate(
        ([name, gateway]) =>
          ((globalThis as Record<string, unknown>)[name] as (g: string) => Promise<Outcome[]>)(gateway),
        [fn, env!.mesh.gatewayUrl] as const,
      );
      await tab.screenshot({ path: join(ARTIFACTS, screenshot), fullPage: true });
      return outcomes;
    } finally {
      await tab.close();
    }
  }

  it("from an allowed origin: fetch across origins, unary and WatchPosts through /rpc with Connect and gRPC-Web, the SSE feed with fetch", async () => {
    const outcomes = await runIn(allowedOrigin, "switchyardRun", "allowed-origin.png");
    expect(outcomes.map((o) => o.check)).to.deep.equal([
      "fetch /v1 across origins (log in)",
      "Connect: unary CreateDocument + GetDocument through /rpc",
      "Connect: WatchPosts through /rpc",
      "gRPC-Web: unary CreateDocument + GetDocument through /rpc",
      "gRPC-Web: WatchPosts through /rpc",
      "the SSE live feed with fetch and a stream reader",
    ]);
    for (const o of outcomes) expect(o.ok, `${o.check}: ${o.detail}`).to.equal(true);
    expect(outcomes[0]!.detail, "an exposed header is readable across origins").to.match(
      /X-RateLimit-Remaining readable: \d+/,
    );
  });

  it("from an origin not on the list: the browser blocks the answer", async () => {
    const outcomes = await runIn(`http://localhost:${page!.port}`, "switchyardRunDisallowed", "disallowed-origin.png");
    expect(outcomes).to.have.length(1);
    expect(outcomes[0]!.ok, outcomes[0]!.detail).to.equal(false);
    expect(outcomes[0]!.detail).to.match(/blocked by the browser/);
  });
});
