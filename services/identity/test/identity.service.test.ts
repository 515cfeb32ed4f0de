// IdentityService over real gRPC: identity trusts its own users table over a token's claims.
import { expect } from "chai";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { Role } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import { TokenVerifier } from "@switchyard/platform/auth.js";
import { openChannel } from "@switchyard/platform/grpc";
import { jwksFromIdentity } from "@switchyard/platform/identity-keys.js";
import { startInProcessMesh, type InProcessMesh } from "../../platform/test/support/in-process-mesh.js";

describe("identity service over gRPC", function () {
  this.timeout(60_000);
  let mesh: InProcessMesh;
  before(async () => {
    mesh = await startInProcessMesh();
  });
  after(async () => mesh?.stop());

  it("stops honouring a deleted user's token at once, even an admin's", async () => {
    const alice = { headers: await mesh.login("alice@acme.test") };
    const { user: eve } = await mesh.identity.createUser(
      { tenantId: "acme", email: "eve@acme.test", fullName: "Eve", password: "eve-password-123", role: Role.ADMIN },
      alice,
    );
    const session = await mesh.identity.createSession({
      tenantId: "acme",
      email: "eve@acme.test",
      password: "eve-password-123",
    });
    const asEve = { headers: { authorization: `Bearer ${session.accessToken}` } };
    expect((await mesh.identity.listUsers({ tenantId: "acme" }, asEve)).users.length).to.be.greaterThan(0);
    await mesh.identity.deleteUser({ tenantId: "acme", userId: eve!.id }, alice);
    for (const call of [
      mesh.identity.listUsers({ tenantId: "acme" }, asEve),
      mesh.identity.createUser(
        {
          tenantId: "acme",
          email: "mallory@acme.test",
          fullName: "Mallory",
          password: "mallory-password",
          role: Role.ADMIN,
        },
        asEve,
      ),
    ]) {
      const err = (await call.then(
        () => undefined,
        (e: unknown) => e,
      )) as ConnectError;
      expect(err).to.be.instanceOf(ConnectError);
      expect(err.code).to.equal(Code.Unauthenticated);
      expect(errorInfoOf(err)?.reason).to.equal("UNAUTHENTICATED");
    }
    const err = (await mesh.identity
      .createSession({ tenantId: "acme", email: "eve@acme.test", password: "eve-password-123" })
      .catch((e: unknown) => e)) as ConnectError;
    expect(errorInfoOf(err)?.reason).to.equal("INVALID_CREDENTIALS");
  });

  it("shows a user its own session (the Location of a login), and nobody else's", async () => {
    const login = await mesh.identity.createSession({
      tenantId: "acme",
      email: "bob@acme.test",
      password: "demo-password",
    });
    const asBob = { headers: { authorization: `Bearer ${login.accessToken}` } };
    const { session } = await mesh.identity.getSession({ tenantId: "acme", sessionId: login.sessionId }, asBob);
    expect(session!.id).to.equal(login.sessionId);
    expect(session!.userId).to.equal(login.user!.id);
    const alice = { headers: await mesh.login("alice@acme.test") };
    const err = (await mesh.identity
      .getSession({ tenantId: "acme", sessionId: login.sessionId }, alice)
      .catch((e: unknown) => e)) as ConnectError;
    expect(err.code).to.equal(Code.NotFound);
    // Ids that cannot be a session's (a NUL the database cannot hold, another shape) name nothing: 404, not 400.
    for (const sessionId of ["tok\u0000visa", "ses_", `${login.sessionId}x`, login.sessionId.toUpperCase()]) {
      const missing = (await mesh.identity
        .getSession({ tenantId: "acme", sessionId }, asBob)
        .catch((e: unknown) => e)) as ConnectError;
      expect([missing.code, errorInfoOf(missing)?.reason], JSON.stringify(sessionId)).to.deep.equal([
        Code.NotFound,
        "NOT_FOUND",
      ]);
    }
  });

  it("issues a service token to a service that presents its secret, and nothing to anyone else", async () => {
    const issued = await mesh.identity.createServiceToken({ clientId: "orders", clientSecret: mesh.ordersSecret });
    expect(issued.expiresInSeconds).to.be.within(60, 900);
    const channel = openChannel(mesh.identityAddress);
    try {
      const verifier = new TokenVerifier(jwksFromIdentity(channel));
      expect((await verifier.verifyService(issued.accessToken)).service).to.equal("orders");
      expect(
        errorInfoOf((await verifier.verify(issued.accessToken).catch((e: unknown) => e)) as ConnectError)?.reason,
        "it is no user's token",
      ).to.equal("UNAUTHENTICATED");
    } finally {
      channel.close();
    }
    for (const [clientId, clientSecret] of [
      ["orders", `${mesh.ordersSecret}x`],
      ["orders", ""],
      ["payments", mesh.ordersSecret],
      ["", ""],
    ] as const) {
      const err = (await mesh.identity
        .createServiceToken({ clientId, clientSecret })
        .catch((e: unknown) => e)) as ConnectError;
      expect([err.code, errorInfoOf(err)?.reason], `${clientId}:${clientSecret.slice(0, 4)}`).to.deep.equal([
        Code.Unauthenticated,
        "INVALID_CREDENTIALS",
      ]);
    }
  });

  describe("revocation", () => {
    const asToken = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
    const codeOf = (p: Promise<unknown>) =>
      p.then(
        () => undefined,
        (e: unknown) => (e as ConnectError).code,
      );

    /** A watch of the revocations: what it has said so far, and whether it has said "synced". */
    function watch() {
      const controller = new AbortController();
      const seen: string[] = [];
      let synced = false;
      const done = (async () => {
        try {
          for await (const m of mesh.identity.watchRevocations({}, { signal: controller.signal })) {
            if (m.revocation) seen.push(m.revocation.sessionId);
            if (m.synced) synced = true;
          }
        } catch {
          // cancelled
        }
      })();
      return {
        seen,
        isSynced: () => synced,
        async until(check: () => boolean, what: string) {
          for (const end = Date.now() + 2_000; !check() && Date.now() < end;) await sleep(10);
          expect(check(), what).to.equal(true);
        },
        async stop() {
          controller.abort();
          await done;
        },
      };
    }

    it("logs a session out: announced on the stream at once, in the snapshot of a new watch, refused everywhere within 2 s", async () => {
      const first = await mesh.identity.createSession({
        tenantId: "acme",
        email: "bob@acme.test",
        password: "demo-password",
      });
      const second = await mesh.identity.createSession({
        tenantId: "acme",
        email: "bob@acme.test",
        password: "demo-password",
      });
      expect((await mesh.payments.listPayments({}, asToken(second.accessToken))).payments).to.be.an("array");
      const live = watch();
      await live.until(live.isSynced, "the watch says when it has the whole list");
      await mesh.identity.deleteSession({ tenantId: "acme", sessionId: second.sessionId }, asToken(first.accessToken));
      await live.until(() => live.seen.includes(second.sessionId), "the revocation is announced");
      let refused: Code | undefined;
      for (const end = Date.now() + 2_000; refused !== Code.Unauthenticated && Date.now() < end; await sleep(20))
        refused = await codeOf(mesh.payments.listPayments({}, asToken(second.accessToken)));
      expect(refused, "payments refuses the logged-out token within 2 s").to.equal(Code.Unauthenticated);
      expect(
        await codeOf(mesh.orders.listUserOrders({ userId: second.user!.id }, asToken(second.accessToken))),
      ).to.equal(Code.Unauthenticated);
      expect(
        await codeOf(
          mesh.identity.getSession({ tenantId: "acme", sessionId: second.sessionId }, asToken(second.accessToken)),
        ),
      ).to.equal(Code.Unauthenticated);
      expect(
        (await mesh.payments.listPayments({}, asToken(first.accessToken))).payments,
        "the other session still works",
      ).to.be.an("array");
      await live.stop();
      const again = watch();
      await again.until(again.isSynced, "a new watch is synced");
      expect(again.seen, "a new watch starts with every standing revocation").to.include(second.sessionId);
      await again.stop();
    });

    it("logs out only one's own sessions: another user's is not found", async () => {
      const bob = await mesh.identity.createSession({
        tenantId: "acme",
        email: "bob@acme.test",
        password: "demo-password",
      });
      const alice = await mesh.identity.createSession({
        tenantId: "acme",
        email: "alice@acme.test",
        password: "demo-password",
      });
      expect(
        await codeOf(
          mesh.identity.deleteSession({ tenantId: "acme", sessionId: alice.sessionId }, asToken(bob.accessToken)),
        ),
      ).to.equal(Code.NotFound);
      expect(
        await codeOf(
          mesh.identity.deleteSession({ tenantId: "acme", sessionId: "ses_nope" }, asToken(bob.accessToken)),
        ),
      ).to.equal(Code.NotFound);
      expect(
        (await mesh.identity.getSession({ tenantId: "acme", sessionId: alice.sessionId }, asToken(alice.accessToken)))
          .session!.id,
      ).to.equal(alice.sessionId);
    });

    it("revokes every session of a deleted user", async () => {
      const alice = { headers: await mesh.login("alice@acme.test") };
      const email = `gone-${Date.now()}@acme.test`;
      await mesh.identity.createUser(
        { tenantId: "acme", email, fullName: "Soon Gone", password: "soon-gone-password", role: Role.MEMBER },
        alice,
      );
      const sessions = await Promise.all(
        [1, 2].map(() => mesh.identity.createSession({ tenantId: "acme", email, password: "soon-gone-password" })),
      );
      const live = watch();
      await live.until(live.isSynced, "synced");
      await mesh.identity.deleteUser({ tenantId: "acme", userId: sessions[0]!.user!.id }, alice);
      await live.until(() => sessions.every((x) => live.seen.includes(x.sessionId)), "both sessions are announced");
      for (const session of sessions) {
        let refused: Code | undefined;
        for (const end = Date.now() + 2_000; refused !== Code.Unauthenticated && Date.now() < end; await sleep(20))
          refused = await codeOf(mesh.payments.listPayments({}, asToken(session.accessToken)));
        expect(refused).to.equal(Code.Unauthenticated);
      }
      await live.stop();
    });
  });
});
