// The page of the browser test (bundled with esbuild for Chromium): what a web app on another origin
// does with the mesh — logs in and reads through /v1 with fetch (CORS), calls a unary method and follows
// WatchPosts through /rpc with @connectrpc/connect-web's Connect and gRPC-Web transports, and follows
// the SSE live feed with fetch and a stream reader (which, unlike EventSource, can send Authorization).
// Each check writes its outcome into the page (for the screenshot) and into the result it returns.
import { createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";

type Outcome = { check: string; ok: boolean; detail: string };

// The DOM of the page, the little of it used here (the project type-checks with Node's types, not the DOM lib's).
interface Element {
  textContent: string | null;
  style: { color: string };
  append(child: Element): void;
}
declare const document: { createElement(tag: string): Element; getElementById(id: string): Element | null };

function show(o: Outcome): Outcome {
  const li = document.createElement("li");
  li.textContent = `${o.ok ? "✔" : "✘"} ${o.check}: ${o.detail}`;
  li.style.color = o.ok ? "green" : "crimson";
  document.getElementById("results")!.append(li);
  return o;
}

async function check(name: string, run: () => Promise<string>): Promise<Outcome> {
  try {
    return show({ check: name, ok: true, detail: await run() });
  } catch (err) {
    return show({ check: name, ok: false, detail: err instanceof Error ? `${err.name}: ${err.message}` : String(err) });
  }
}

async function post(gateway: string, token: string, title: string): Promise<void> {
  const res = await fetch(`${gateway}/v1/posts`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ title, body: "from the page" }),
  });
  if (res.status !== 201) throw new Error(`POST /v1/posts → ${res.status}`);
}

/** Follows WatchPosts through /rpc until the post made once it is subscribed arrives. */
async function watchThrough(transport: Transport, gateway: string, token: string, title: string): Promise<string> {
  const content = createClient(ContentService, transport);
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), 10_000);
  try {
    for await (const m of content.watchPosts(
      {},
      { headers: { authorization: `Bearer ${token}` }, signal: controller.signal },
    )) {
      if (m.subscribed) await post(gateway, token, title);
      if (m.post?.title === title) {
        controller.abort();
        return `got "${m.post.title}" (${m.post.id})`;
      }
    }
  } catch (err) {
    if (!controller.signal.aborted) throw err;
  } finally {
    clearTimeout(timer);
  }
  throw new Error("the post did not arrive");
}

/** The SSE feed with fetch and a stream reader: the event of the post made once the stream is open. */
async function sseThrough(gateway: string, token: string, title: string): Promise<string> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), 10_000);
  try {
    const res = await fetch(`${gateway}/v1/posts`, {
      headers: { accept: "text/event-stream", authorization: `Bearer ${token}` },
      signal: controller.signal,
    });
    if (res.status !== 200) throw new Error(`GET /v1/posts (event-stream) → ${res.status}`);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    let posted = false;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error("the stream ended");
      text += value;
      if (!posted && text.includes("retry:")) {
        posted = true;
        await post(gateway, token, title);
      }
      const event = text
        .split("\n\n")
        .find((block) => block.includes("event: post") && block.includes(`"title":"${title}"`));
      if (event) {
        controller.abort();
        return `event id ${/^id: (.*)$/m.exec(event)?.[1] ?? "?"}`;
      }
    }
  } finally {
    clearTimeout(timer);
  }
}

async function run(gateway: string): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  let token = "";
  outcomes.push(
    await check("fetch /v1 across origins (log in)", async () => {
      const res = await fetch(`${gateway}/v1/tenants/acme/sessions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: "alice@acme.test", password: "demo-password" }),
      });
      const body = (await res.json()) as { access_token: string };
      token = body.access_token;
      return `${res.status}, a token; X-RateLimit-Remaining readable: ${res.headers.get("x-ratelimit-remaining") ?? "no"}`;
    }),
  );
  const transports: [string, Transport][] = [
    ["Connect", createConnectTransport({ baseUrl: `${gateway}/rpc` })],
    ["gRPC-Web", createGrpcWebTransport({ baseUrl: `${gateway}/rpc` })],
  ];
  for (const [name, transport] of transports) {
    outcomes.push(
      await check(`${name}: unary CreateDocument + GetDocument through /rpc`, async () => {
        const content = createClient(ContentService, transport);
        const headers = { authorization: `Bearer ${token}` };
        const { document: made } = await content.createDocument(
          { title: `from the page (${name})`, body: "hello" },
          { headers },
        );
        const { document: read } = await content.getDocument({ documentId: made!.id }, { headers });
        if (read?.title !== made?.title) throw new Error("read back another document");
        return `${read!.id}, etag ${read!.etag}`;
      }),
    );
    outcomes.push(
      await check(`${name}: WatchPosts through /rpc`, () =>
        watchThrough(transport, gateway, token, `watched via ${name} ${Date.now()}`),
      ),
    );
  }
  outcomes.push(
    await check("the SSE live feed with fetch and a stream reader", () =>
      sseThrough(gateway, token, `sse ${Date.now()}`),
    ),
  );
  return outcomes;
}

/** From a page whose origin is not allowed: the browser refuses to hand the answer over. */
async function runDisallowed(gateway: string): Promise<Outcome[]> {
  return [
    await check("fetch /v1 from an origin not allowed", async () => {
      try {
        await fetch(`${gateway}/v1/catalog/items`);
      } catch (err) {
        throw new Error(`blocked by the browser (${err instanceof Error ? err.message : String(err)})`);
      }
      return "answered (it should not have been)";
    }),
  ];
}

Object.assign(globalThis, { switchyardRun: run, switchyardRunDisallowed: runDisallowed });
