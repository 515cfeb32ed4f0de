// What follows the store's announcements (LISTEN/NOTIFY) when they are lost: the live posts feed,
// TrackOrders and identity's revocations. The services run in this process on a PostgreSQL server
// of the test's own; the LISTEN connections are cut while new connections are refused, and in that
// window a post is made, an order paid and a session revoked — their announcements go nowhere. Once
// connections are allowed again, each follower reads what it missed: the watcher gets the post, the
// tracker the order's new status, every verifier the revocation.
import { expect } from "chai";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { Code, ConnectError } from "@connectrpc/connect";
import { OrderStatus } from "@switchyard/gen/switchyard/orders/v1/orders_pb.js";
import { startInProcessMesh, type InProcessMesh } from "../services/platform/test/support/in-process-mesh.js";
import { startPostgresServer, type PostgresServer } from "../services/platform/test/support/postgres-server.js";

type Auth = { headers: Record<string, string> };

async function until(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  for (const end = Date.now() + timeoutMs; !check();) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

describe("store followers after lost announcements (a PostgreSQL server of its own)", function () {
  this.timeout(90_000);
  let server: PostgresServer;
  let mesh: InProcessMesh;
  let admin: pg.Client;
  let alice: Auth;
  const controller = new AbortController();

  before(async function () {
    this.timeout(90_000);
    const started = await startPostgresServer();
    if ("skip" in started) {
      console.log(`    (skipped: ${started.skip})`);
      this.skip();
    }
    server = started;
    mesh = await startInProcessMesh({ databaseUrl: server.url });
    alice = { headers: await mesh.login("alice@acme.test") };
    // On another database: PostgreSQL cannot refuse connections to the one its session is in.
    admin = new pg.Client({ connectionString: server.url.replace(/\/postgres$/, "/template1") });
    admin.on("error", () => {});
    await admin.connect();
  });

  after(async function () {
    this.timeout(60_000);
    controller.abort();
    await admin?.query("ALTER DATABASE postgres WITH ALLOW_CONNECTIONS true").catch(() => {});
    await admin?.end().catch(() => {});
    await mesh?.stop();
    await server?.destroy();
  });

  it("a post, a payment and a logout made while no LISTEN connection could be made reach their followers afterwards", async () => {
    const signal = controller.signal;
    // The watcher of acme's feed, from now.
    const posts: string[] = [];
    const streamErrors: string[] = [];
    const noted = (what: string) => (err: unknown) =>
      void (signal.aborted || streamErrors.push(`${what}: ${String(err)}`));
    let subscribed = false;
    void (async () => {
      for await (const m of mesh.content.watchPosts({}, { ...alice, signal })) {
        if (m.subscribed) subscribed = true;
        if (m.post) posts.push(m.post.title);
      }
    })().catch(noted("watchPosts"));
    // A tracker of one order.
    const { order } = await mesh.orders.createOrder(
      { currency: "EUR", items: [{ sku: "BOOK-1", quantity: 1n }] },
      alice,
    );
    const statuses: string[] = [];
    const follows = (async function* () {
      yield { action: { case: "followOrderId" as const, value: order!.id } };
      await sleep(120_000, undefined, { signal }).catch(() => {});
    })();
    void (async () => {
      for await (const m of mesh.orders.trackOrders(follows, { ...alice, signal }))
        statuses.push(OrderStatus[m.status]);
    })().catch(noted("trackOrders"));
    // A session to log out, and identity's revocation stream.
    const bob = await mesh.identity.createSession({
      tenantId: "acme",
      email: "bob@acme.test",
      password: "demo-password",
    });
    const asBob = { headers: { authorization: `Bearer ${bob.accessToken}` } };
    const revoked: string[] = [];
    void (async () => {
      for await (const m of mesh.identity.watchRevocations({}, { signal }))
        if (m.revocation) revoked.push(m.revocation.sessionId);
    })().catch(noted("watchRevocations"));
    await until(() => subscribed && statuses.length === 1, "the watch and the tracker to start").catch(
      (err: unknown) => {
        throw new Error(
          `${String(err)} (subscribed ${subscribed}, statuses ${JSON.stringify(statuses)}, ${JSON.stringify(streamErrors)})`,
        );
      },
    );
    expect(statuses).to.deep.equal(["PENDING"]);
    // Bob's token works at payments before.
    await mesh.payments.listPayments({}, asBob);

    // Warm every pool (their idle connections carry the work below), then refuse new connections
    // and cut the LISTEN ones: they cannot come back until connections are allowed again.
    await Promise.all([
      mesh.content.listPosts({}, alice),
      mesh.orders.getOrder({ orderId: order!.id }, alice),
      mesh.payments.listPayments({}, alice),
      mesh.identity.getSession({ tenantId: "acme", sessionId: bob.sessionId }, asBob),
    ]);
    await admin.query("ALTER DATABASE postgres WITH ALLOW_CONNECTIONS false");
    const cut = await admin.query<{ n: string }>(
      `SELECT count(pg_terminate_backend(pid))::text AS n FROM pg_stat_activity WHERE query LIKE 'LISTEN %' AND pid <> pg_backend_pid()`,
    );
    expect(Number(cut.rows[0]!.n), "the LISTEN connections of identity, orders, content and the others").to.be.at.least(
      3,
    );

    await mesh.content.createPost({ title: "made while nobody listened", body: "…" }, alice);
    await mesh.orders.payOrder({ orderId: order!.id, source: "tok_visa" }, alice);
    await mesh.identity.deleteSession({ tenantId: "acme", sessionId: bob.sessionId }, asBob);
    await sleep(500);
    expect(posts, "nothing was announced").to.deep.equal([]);
    expect(statuses).to.deep.equal(["PENDING"]);

    await admin.query("ALTER DATABASE postgres WITH ALLOW_CONNECTIONS true");
    await until(() => posts.length > 0, "the post to reach its watcher");
    await until(() => statuses.length > 1, "the payment to reach its tracker");
    await until(() => revoked.includes(bob.sessionId), "the revocation to reach identity's watchers");
    expect(posts).to.deep.equal(["made while nobody listened"]);
    expect(statuses).to.deep.equal(["PENDING", "PAID"]);
    // Payments follows identity's stream: bob's token is refused there within 2 s of the return.
    let code: Code | undefined;
    for (const end = Date.now() + 2_000; code !== Code.Unauthenticated && Date.now() < end; await sleep(50))
      code = await mesh.payments.listPayments({}, asBob).then(
        () => undefined,
        (err: unknown) => ConnectError.from(err).code,
      );
    expect(code === undefined ? "accepted" : Code[code]).to.equal("Unauthenticated");
  });
});
