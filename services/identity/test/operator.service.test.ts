// OperatorService over real gRPC: the operator — its own service token, and nobody else's credential —
// creates a tenant with its first admin, both or neither; what it is given never reaches a log line.
import { expect } from "chai";
import { randomBytes } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { Role } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { errorInfoOf } from "@switchyard/platform/errors.js";
import type { SqlDatabase } from "@switchyard/platform/store";
import { forEachDatabase } from "../../platform/test/support/databases.js";
import { serviceEngines } from "../../platform/test/support/in-process-mesh.js";
import { identityMigrations } from "../src/store/migrations.js";
import { SqlIdentityStore } from "../src/store/sql-store.js";
import { startTestIdentity, type TestIdentity } from "./support/test-identity.js";

const failureOf = async (call: Promise<unknown>) => {
  const err = await call.then(
    () => expect.fail("expected the call to be refused"),
    (e: unknown) => e,
  );
  expect(err).to.be.instanceOf(ConnectError);
  const info = errorInfoOf(err as ConnectError);
  return { code: (err as ConnectError).code, reason: info?.reason, field: info?.metadata.field };
};
const asUser = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
const newTenantId = () => `t-${randomBytes(5).toString("hex")}`;

for (const engine of serviceEngines()) {
  describe(`operator service over gRPC (${engine.name})`, function () {
    this.timeout(90_000);
    let id: TestIdentity;
    let asOperator: { headers: Record<string, string> };
    const passwordsUsed: string[] = [];
    const tokensSeen: string[] = [];

    before(async () => {
      id = await startTestIdentity({ databaseUrl: engine.databaseUrl });
      asOperator = await id.asService("operator");
      tokensSeen.push(asOperator.headers["service-authorization"]!.slice("Bearer ".length));
    });
    after(async () => id?.stop());

    const request = (
      over: Partial<{
        tenantId: string;
        displayName: string;
        adminEmail: string;
        adminFullName: string;
        adminPassword: string;
      }> = {},
    ) => {
      const req = {
        tenantId: newTenantId(),
        displayName: "New Tenant Ltd",
        adminEmail: "first@new.test",
        adminFullName: "First Admin",
        adminPassword: `pw-${randomBytes(9).toString("hex")}`,
        ...over,
      };
      passwordsUsed.push(req.adminPassword);
      return req;
    };
    const login = async (tenantId: string, email: string, password: string) => {
      const session = await id.identity.createSession({ tenantId, email, password });
      tokensSeen.push(session.accessToken);
      return session;
    };

    it("creates a tenant and its first admin, who logs in and manages the tenant", async () => {
      const req = request();
      const { tenant, admin } = await id.operator.createTenant(req, asOperator);
      expect(tenant).to.include({ id: req.tenantId, displayName: "New Tenant Ltd" });
      expect(admin).to.include({
        tenantId: req.tenantId,
        email: "first@new.test",
        fullName: "First Admin",
        role: Role.ADMIN,
      });
      expect(admin!.id > 0n).to.equal(true);
      const session = await login(req.tenantId, req.adminEmail, req.adminPassword);
      expect(session.user!.id).to.equal(admin!.id);
      expect(session.user!.role).to.equal(Role.ADMIN);
      expect(
        (await id.identity.getTenant({ tenantId: req.tenantId }, asUser(session.accessToken))).tenant!.displayName,
      ).to.equal("New Tenant Ltd");
      expect(
        (await id.identity.listUsers({ tenantId: req.tenantId }, asUser(session.accessToken))).users.map((u) => u.id),
      ).to.deep.equal([admin!.id]);
      // An admin indeed: it adds the tenant's next user.
      const member = await id.identity.createUser(
        {
          tenantId: req.tenantId,
          email: "second@new.test",
          fullName: "Second",
          password: "second-password-1",
          role: Role.MEMBER,
        },
        asUser(session.accessToken),
      );
      expect(member.user!.role).to.equal(Role.MEMBER);
    });

    it("names the tenant after its id and the admin after the email when they are not given", async () => {
      const req = request({ displayName: "", adminFullName: "  " });
      const { tenant, admin } = await id.operator.createTenant(req, asOperator);
      expect(tenant!.displayName).to.equal(req.tenantId);
      expect(admin!.fullName).to.equal(req.adminEmail);
    });

    it("refuses every caller but the operator — a tenant admin, orders, no one — and creates nothing for them", async () => {
      const first = request();
      await id.operator.createTenant(first, asOperator);
      const adminToken = (await login(first.tenantId, first.adminEmail, first.adminPassword)).accessToken;
      const asOrders = await id.asService("orders");
      const req = request();
      const refused = {
        "no credential": await failureOf(id.operator.createTenant(req)),
        "a tenant admin's token": await failureOf(id.operator.createTenant(req, asUser(adminToken))),
        "a tenant admin's token as a service's": await failureOf(
          id.operator.createTenant(req, { headers: { "service-authorization": `Bearer ${adminToken}` } }),
        ),
        "a tenant admin's token beside a garbage service token": await failureOf(
          id.operator.createTenant(req, {
            headers: { ...asUser(adminToken).headers, "service-authorization": "Bearer garbage" },
          }),
        ),
        "orders' service token": await failureOf(id.operator.createTenant(req, asOrders)),
        "orders' service token and an admin's": await failureOf(
          id.operator.createTenant(req, { headers: { ...asOrders.headers, ...asUser(adminToken).headers } }),
        ),
        "a garbage token": await failureOf(
          id.operator.createTenant(req, { headers: { "service-authorization": "Bearer abc.def.ghi" } }),
        ),
      };
      expect(
        Object.fromEntries(Object.entries(refused).map(([who, f]) => [who, [Code[f.code], f.reason]])),
      ).to.deep.equal({
        "no credential": ["Unauthenticated", "UNAUTHENTICATED"],
        "a tenant admin's token": ["Unauthenticated", "UNAUTHENTICATED"],
        "a tenant admin's token as a service's": ["Unauthenticated", "UNAUTHENTICATED"],
        "a tenant admin's token beside a garbage service token": ["Unauthenticated", "UNAUTHENTICATED"],
        "orders' service token": ["PermissionDenied", "ROLE_REQUIRED"],
        "orders' service token and an admin's": ["PermissionDenied", "ROLE_REQUIRED"],
        "a garbage token": ["Unauthenticated", "UNAUTHENTICATED"],
      });
      // None of them made the tenant: the operator still can.
      expect((await id.operator.createTenant(req, asOperator)).tenant!.id).to.equal(req.tenantId);
    });

    it("answers ALREADY_EXISTS for an existing tenant and leaves it as it was", async () => {
      const first = request();
      await id.operator.createTenant(first, asOperator);
      const again = request({ tenantId: first.tenantId, adminEmail: "intruder@new.test", displayName: "Taken Over" });
      expect(await failureOf(id.operator.createTenant(again, asOperator))).to.deep.equal({
        code: Code.AlreadyExists,
        reason: "ALREADY_EXISTS",
        field: "tenant_id",
      });
      expect(await failureOf(id.operator.createTenant(first, asOperator)), "an identical re-run too").to.include({
        code: Code.AlreadyExists,
      });
      expect(
        (await failureOf(login(first.tenantId, again.adminEmail, again.adminPassword))).reason,
        "no second admin",
      ).to.equal("INVALID_CREDENTIALS");
      const session = await login(first.tenantId, first.adminEmail, first.adminPassword);
      expect(
        (await id.identity.getTenant({ tenantId: first.tenantId }, asUser(session.accessToken))).tenant!.displayName,
      ).to.equal(first.displayName);
      expect(
        (await id.identity.listUsers({ tenantId: first.tenantId }, asUser(session.accessToken))).users,
      ).to.have.length(1);
    });

    it("makes a tenant once when two operators race to make it", async () => {
      const tenantId = newTenantId();
      const outcomes = await Promise.allSettled(
        [request({ tenantId, adminEmail: "a@race.test" }), request({ tenantId, adminEmail: "b@race.test" })].map((r) =>
          id.operator.createTenant(r, asOperator),
        ),
      );
      expect(outcomes.filter((o) => o.status === "fulfilled")).to.have.length(1);
      const lost = outcomes.find((o) => o.status === "rejected") as PromiseRejectedResult;
      expect(errorInfoOf(lost.reason as ConnectError)?.reason).to.equal("ALREADY_EXISTS");
    });

    it("refuses a bad tenant id, email, name or password with INVALID_ARGUMENT, creating nothing", async () => {
      const cases: [string, Parameters<typeof request>[0], string][] = [
        ["upper case", { tenantId: "Acme" }, "tenant_id"],
        ["leading dash", { tenantId: "-acme" }, "tenant_id"],
        ["underscore", { tenantId: "ac_me" }, "tenant_id"],
        ["space", { tenantId: "acme corp" }, "tenant_id"],
        ["empty", { tenantId: "" }, "tenant_id"],
        ["64 characters", { tenantId: "a".repeat(64) }, "tenant_id"],
        ["email without @", { adminEmail: "first.new.test" }, "admin_email"],
        ["email without a dotted domain", { adminEmail: "first@new" }, "admin_email"],
        ["no email", { adminEmail: "" }, "admin_email"],
        ["short password", { adminPassword: "short-pw" }, "admin_password"],
        ["11-character password", { adminPassword: "x".repeat(11) }, "admin_password"],
        ["overlong password", { adminPassword: "x".repeat(257) }, "admin_password"],
        ["control character in the name", { adminFullName: "First\u0007Admin" }, "admin_full_name"],
        ["control character in the display name", { displayName: "New\nTenant" }, "display_name"],
      ];
      for (const [what, over, field] of cases) {
        const req = request(over);
        expect(await failureOf(id.operator.createTenant(req, asOperator)), what).to.deep.equal({
          code: Code.InvalidArgument,
          reason: "RULE_VIOLATION",
          field,
        });
        // Nothing was created: the tenant id is still free (where it is a valid one).
        if (field !== "tenant_id")
          expect(
            (await id.operator.createTenant(request({ tenantId: req.tenantId }), asOperator)).tenant!.id,
            what,
          ).to.equal(req.tenantId);
      }
    });

    it("writes an audit line per tenant made, and no password, hash or token in any line", async () => {
      const req = request();
      const { admin } = await id.operator.createTenant(req, asOperator);
      const lines = id
        .logs()
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      const audit = lines.find((l) => l.tenantId === req.tenantId);
      expect(audit).to.include({
        msg: "tenant created with its first admin",
        adminUserId: admin!.id.toString(),
        by: "operator",
      });
      const everything = id.logs();
      expect(
        lines.some((l) => l.msg === "rpc failed"),
        "refusals are logged (debug), so their lines were checked too",
      ).to.equal(true);
      for (const secret of [
        ...passwordsUsed.filter((p) => p.length >= 8),
        ...tokensSeen,
        id.operatorSecret,
        id.ordersSecret,
      ])
        expect(everything).to.not.include(secret);
      expect(everything).to.not.match(/\$argon2|\$scrypt|eyJ[\w-]+\.eyJ/);
    });
  });
}

forEachDatabase("identity store: a tenant with its first admin", (dbs) => {
  let db: SqlDatabase;
  before(async () => {
    db = await dbs.open(identityMigrations);
  });

  it("writes neither the tenant nor the admin when the admin cannot be written", async () => {
    const store = new SqlIdentityStore(db);
    // A NOT NULL column left null: the admin's insert fails after the tenant's succeeded.
    const broken = {
      email: "first@new.test",
      fullName: "First",
      givenName: "First",
      familyName: "",
      passwordHash: null as unknown as string,
    };
    const err = await store.createTenantWithAdmin({ id: "half", displayName: "Half" }, broken).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(Error);
    expect(await store.getTenant("half"), "the tenant was rolled back").to.equal(undefined);
    const made = await store.createTenantWithAdmin(
      { id: "half", displayName: "Half" },
      { ...broken, passwordHash: "$argon2id$stand-in" },
    );
    expect(made.admin).to.include({ tenantId: "half", role: "admin", email: "first@new.test" });
    expect(await store.findUserByEmail("half", "first@new.test")).to.include({ id: made.admin.id });
  });
});
