// Revocation in seconds, through the real mesh: after a logout (DELETE …/sessions/{id}) or a user's
// deletion, the token is refused within 2 seconds by the gateway and by every service asked
// directly over gRPC; live feeds opened with it — Server-Sent Events through the gateway, WatchPosts
// over gRPC — end; and a service restarted afterwards still refuses it (it reads the list anew).
import { expect } from "chai";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { ContentService } from "@switchyard/gen/switchyard/content/v1/content_pb.js";
import { OrderService } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { PaymentService } from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { createServiceClient, openChannel } from "@switchyard/platform/grpc";
import { ALICE, BOB, jwtPayload, startE2eMesh, unique, type E2eMesh } from "../support/http.js";

const WITHIN_MS = 2_000;

describe("e2e: revocation in seconds", function () {
  this.timeout(60_000);
  let env: E2eMesh;
  let channels: ReturnType<typeof openChannel>[] = [];
  let grpc: {
    payments: ReturnType<typeof createServiceClient<typeof PaymentService>>;
    orders: ReturnType<typeof createServiceClient<typeof OrderService>>;
    content: ReturnType<typeof createServiceClient<typeof ContentService>>;
  };

  before(async function () {
    this.timeout(120_000);
    env = await startE2eMesh("revocation");
    const open = (port: number) => {
      const channel = openChannel(`127.0.0.1:${port}`);
      channels.push(channel);
      return channel;
    };
    grpc = {
      payments: createServiceClient(PaymentService, open(env.mesh.ports.payments)),
      orders: createServiceClient(OrderService, open(env.mesh.ports.orders)),
      content: createServiceClient(ContentService, open(env.mesh.ports.content)),
    };
  });
  after(async () => {
    for (const c of channels) c.close();
    channels = [];
    await env?.stop();
  });

  const login = async (who: { tenant: string; email: string }, password = "demo-password") => {
    const res = await env.api.post(`/v1/tenants/${who.tenant}/sessions`, { json: { email: who.email, password } });
    expect(res.status, res.text).to.equal(201);
    return {
      token: res.json.access_token as string,
      sessionId: res.json.id as string,
      userId: BigInt(jwtPayload(res.json.access_token).sub as string),
    };
  };
  const auth = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
  const codeOf = (p: Promise<unknown>) =>
    p.then(
      () => 0,
      (e: unknown) => (e instanceof ConnectError ? e.code : -1),
    );

  /** Every place the token is presented: the gateway, and each service directly. */
  const places = (token: string, userId: bigint) => ({
    gateway: async () =>
      (await env.api.get("/v1/payments?limit=1", { token })).status === 401 ? "refused" : "accepted",
    payments: async () =>
      (await codeOf(grpc.payments.listPayments({}, auth(token)))) === Code.Unauthenticated ? "refused" : "accepted",
    orders: async () =>
      (await codeOf(grpc.orders.listUserOrders({ userId }, auth(token)))) === Code.Unauthenticated
        ? "refused"
        : "accepted",
    content: async () =>
      (await codeOf(grpc.content.listPosts({}, auth(token)))) === Code.Unauthenticated ? "refused" : "accepted",
  });

  async function refusedEverywhereWithin(token: string, userId: bigint, since: number): Promise<void> {
    for (const [name, ask] of Object.entries(places(token, userId))) {
      let answer = await ask();
      while (answer !== "refused" && Date.now() - since < WITHIN_MS) {
        await sleep(25);
        answer = await ask();
      }
      expect(answer, `${name} refuses the token within ${WITHIN_MS} ms (${Date.now() - since} ms)`).to.equal("refused");
    }
  }

  /** An SSE feed opened with the token: the frames it got, and how it ended. */
  async function openFeed(token: string) {
    const controller = new AbortController();
    const res = await fetch(`${env.mesh.gatewayUrl}/v1/posts`, {
      headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" },
      signal: controller.signal,
    });
    expect(res.status).to.equal(200);
    let text = "";
    const ended = (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of res.body!) text += decoder.decode(chunk as Uint8Array, { stream: true });
    })().then(
      () => "ended",
      () => "aborted",
    );
    return { text: () => text, ended, abort: () => controller.abort() };
  }

  /** A gRPC WatchPosts opened with the token: how it ended. */
  function openWatch(token: string) {
    const controller = new AbortController();
    let subscribed = false;
    const ended = (async () => {
      for await (const m of grpc.content.watchPosts({}, { ...auth(token), signal: controller.signal }))
        if (m.subscribed) subscribed = true;
      return 0;
    })().catch((e: unknown) => (e instanceof ConnectError ? e.code : -1));
    return { ended, isSubscribed: () => subscribed, abort: () => controller.abort() };
  }

  const within = <T>(p: Promise<T>, what: string) =>
    Promise.race([
      p,
      sleep(WITHIN_MS + 1_000).then(() => expect.fail(`${what}: not within ${WITHIN_MS} ms`)),
    ]) as Promise<T>;

  it("logging out refuses the token everywhere within 2 s and ends its live feeds; other sessions go on", async () => {
    const bob = await login(BOB);
    const other = await login(BOB);
    for (const [name, ask] of Object.entries(places(bob.token, bob.userId)))
      expect(await ask(), `${name} accepts the fresh token`).to.equal("accepted");
    const feed = await openFeed(bob.token);
    const watch = openWatch(bob.token);
    for (let i = 0; i < 100 && !watch.isSubscribed(); i++) await sleep(20);
    const started = Date.now();
    const out = await env.api.delete(`/v1/tenants/acme/sessions/${bob.sessionId}`, { token: bob.token });
    expect(out.status, out.text).to.equal(204);
    await refusedEverywhereWithin(bob.token, bob.userId, started);
    expect(await within(feed.ended, "the SSE feed ends")).to.equal("ended");
    expect(feed.text(), `the feed's text: ${JSON.stringify(feed.text())}`).to.match(
      /event: error\ndata: \{"error":"the live feed ended: [^"]*revoked[^"]*","code":"UNAUTHENTICATED"\}/,
    );
    expect(await within(watch.ended, "the gRPC watch ends"), "WatchPosts ends UNAUTHENTICATED").to.equal(
      Code.Unauthenticated,
    );
    for (const [name, ask] of Object.entries(places(other.token, other.userId)))
      expect(await ask(), `${name}: bob's other session goes on`).to.equal("accepted");
    // Logging out again with the revoked token is a plain 401.
    expect((await env.api.delete(`/v1/tenants/acme/sessions/${bob.sessionId}`, { token: bob.token })).status).to.equal(
      401,
    );
  });

  it("deleting a user refuses every token of theirs everywhere within 2 s", async () => {
    const alice = await login(ALICE);
    const who = { tenant: "acme", email: `leaving-${unique()}@acme.test` };
    const made = await env.api.post("/v1/tenants/acme/users", {
      token: alice.token,
      json: { email: who.email, full_name: "Leaving Soon", password: "leaving-password", role: "member" },
    });
    expect(made.status, made.text).to.equal(201);
    const sessions = [await login(who, "leaving-password"), await login(who, "leaving-password")];
    const feed = await openFeed(sessions[0]!.token);
    const started = Date.now();
    expect((await env.api.delete(`/v1/tenants/acme/users/${made.json.id}`, { token: alice.token })).status).to.equal(
      204,
    );
    for (const s of sessions) await refusedEverywhereWithin(s.token, s.userId, started);
    expect(await within(feed.ended, "the SSE feed ends")).to.equal("ended");
  });

  it("identity restarted: every follower reconnects, and a logout afterwards is refused everywhere within 2 s again", async function () {
    this.timeout(90_000);
    const bob = await login(BOB);
    const seen = env.mesh.logs.length;
    await env.mesh.restartService("identity");
    // The followers' streams broke with identity; each reconnects (backoff up to 2 s), reads the list
    // anew and says so in its log.
    const followers = ["gateway", "payments", "orders", "content"];
    const resynced = () => {
      const lines = env.mesh.logs
        .slice(seen)
        .join("")
        .split("\n")
        .filter((l) => l.includes("following token revocations again"));
      return followers.every((f) => lines.some((l) => l.includes(`"service":"${f}"`)));
    };
    for (const until = Date.now() + 10_000; !resynced() && Date.now() < until;) await sleep(50);
    expect(resynced(), "every follower reconnected to the new identity").to.equal(true);
    const fresh = await login(BOB);
    const started = Date.now();
    const out = await env.api.delete(`/v1/tenants/acme/sessions/${fresh.sessionId}`, { token: fresh.token });
    expect(out.status, out.text).to.equal(204);
    await refusedEverywhereWithin(fresh.token, fresh.userId, started);
    for (const [name, ask] of Object.entries(places(bob.token, bob.userId)))
      expect(await ask(), `${name}: a session logged in before the restart goes on`).to.equal("accepted");
  });

  it("a service restarted after a logout still refuses the token: it reads the standing revocations when it starts", async function () {
    this.timeout(90_000);
    const bob = await login(BOB);
    expect((await env.api.delete(`/v1/tenants/acme/sessions/${bob.sessionId}`, { token: bob.token })).status).to.equal(
      204,
    );
    await refusedEverywhereWithin(bob.token, bob.userId, Date.now());
    await env.mesh.restartService("payments");
    const since = Date.now();
    let code = await codeOf(grpc.payments.listPayments({}, auth(bob.token)));
    while (code !== Code.Unauthenticated && Date.now() - since < WITHIN_MS) {
      await sleep(25);
      code = await codeOf(grpc.payments.listPayments({}, auth(bob.token)));
    }
    expect(code).to.equal(Code.Unauthenticated);
  });
});
