// IdentityService over real gRPC: identity trusts its own users table over a token's claims.
import { expect } from "chai";
import { Code, ConnectError } from "@connectrpc/connect";
import { Role } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { errorInfoOf, jwksFromIdentity, openChannel, TokenVerifier } from "@switchyard/platform";
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
    const { user: eve } = await mesh.identity.createUser({ tenantId: "acme", email: "eve@acme.test", fullName: "Eve", password: "eve-password-123", role: Role.ADMIN }, alice);
    const session = await mesh.identity.createSession({ tenantId: "acme", email: "eve@acme.test", password: "eve-password-123" });
    const asEve = { headers: { authorization: `Bearer ${session.accessToken}` } };
    expect((await mesh.identity.listUsers({ tenantId: "acme" }, asEve)).users.length).to.be.greaterThan(0);
    await mesh.identity.deleteUser({ tenantId: "acme", userId: eve!.id }, alice);
    for (const call of [
      mesh.identity.listUsers({ tenantId: "acme" }, asEve),
      mesh.identity.createUser({ tenantId: "acme", email: "mallory@acme.test", fullName: "Mallory", password: "mallory-password", role: Role.ADMIN }, asEve),
    ]) {
      const err = (await call.then(() => undefined, (e: unknown) => e)) as ConnectError;
      expect(err).to.be.instanceOf(ConnectError);
      expect(err.code).to.equal(Code.Unauthenticated);
      expect(errorInfoOf(err)?.reason).to.equal("UNAUTHENTICATED");
    }
    const err = (await mesh.identity.createSession({ tenantId: "acme", email: "eve@acme.test", password: "eve-password-123" }).catch((e: unknown) => e)) as ConnectError;
    expect(errorInfoOf(err)?.reason).to.equal("INVALID_CREDENTIALS");
  });

  it("shows a user its own session (the Location of a login), and nobody else's", async () => {
    const login = await mesh.identity.createSession({ tenantId: "acme", email: "bob@acme.test", password: "demo-password" });
    const asBob = { headers: { authorization: `Bearer ${login.accessToken}` } };
    const { session } = await mesh.identity.getSession({ tenantId: "acme", sessionId: login.sessionId }, asBob);
    expect(session!.id).to.equal(login.sessionId);
    expect(session!.userId).to.equal(login.user!.id);
    const alice = { headers: await mesh.login("alice@acme.test") };
    const err = (await mesh.identity.getSession({ tenantId: "acme", sessionId: login.sessionId }, alice).catch((e: unknown) => e)) as ConnectError;
    expect(err.code).to.equal(Code.NotFound);
    // Ids that cannot be a session's (a NUL the database cannot hold, another shape) name nothing: 404, not 400.
    for (const sessionId of ["tok\u0000visa", "ses_", `${login.sessionId}x`, login.sessionId.toUpperCase()]) {
      const missing = (await mesh.identity.getSession({ tenantId: "acme", sessionId }, asBob).catch((e: unknown) => e)) as ConnectError;
      expect([missing.code, errorInfoOf(missing)?.reason], JSON.stringify(sessionId)).to.deep.equal([Code.NotFound, "NOT_FOUND"]);
    }
  });

  it("issues a service token to a service that presents its secret, and nothing to anyone else", async () => {
    const issued = await mesh.identity.createServiceToken({ clientId: "orders", clientSecret: mesh.ordersSecret });
    expect(issued.expiresInSeconds).to.be.within(60, 900);
    const channel = openChannel(mesh.identityAddress);
    try {
      const verifier = new TokenVerifier(jwksFromIdentity(channel));
      expect((await verifier.verifyService(issued.accessToken)).service).to.equal("orders");
      expect(errorInfoOf((await verifier.verify(issued.accessToken).catch((e: unknown) => e)) as ConnectError)?.reason, "it is no user's token").to.equal("UNAUTHENTICATED");
    } finally {
      channel.close();
    }
    for (const [clientId, clientSecret] of [
      ["orders", `${mesh.ordersSecret}x`],
      ["orders", ""],
      ["payments", mesh.ordersSecret],
      ["", ""],
    ] as const) {
      const err = (await mesh.identity.createServiceToken({ clientId, clientSecret }).catch((e: unknown) => e)) as ConnectError;
      expect([err.code, errorInfoOf(err)?.reason], `${clientId}:${clientSecret.slice(0, 4)}`).to.deep.equal([Code.Unauthenticated, "INVALID_CREDENTIALS"]);
    }
  });
});
