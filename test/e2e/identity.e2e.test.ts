// End to end through the real mesh (identity, payments and gateway as separate processes):
// sessions, users, tenant scope and roles, forged tokens, malformed ids, and that no credential
// or hash ever leaves the mesh — neither in a response nor in a log line.
import { expect } from "chai";
import {
  ALICE,
  BOB,
  CAROL,
  DEMO_PASSWORD,
  b64url,
  expectError,
  expectUnauthenticated,
  jwtPayload,
  startE2eMesh,
  unique,
  type Api,
  type E2eMesh,
} from "../support/http.js";

const USER_KEYS = ["created_at", "email", "full_name", "id", "role"];
const SESSION_KEYS = ["access_token", "expires_in", "id", "token_type"];

describe("e2e: identity through the gateway", function () {
  this.timeout(30_000);

  let env: E2eMesh;
  let api: Api;
  let alice: string;
  let bob: string;
  let carol: string;
  /** Every access token handed out in this file: none may appear in a log. */
  const tokens: string[] = [];
  /** Every password sent in this file: none may appear in a log. */
  const passwords: string[] = [DEMO_PASSWORD];

  before(async function () {
    this.timeout(90_000);
    env = await startE2eMesh("identity");
    api = env.api;
    [alice, bob, carol] = await Promise.all([api.login(ALICE), api.login(BOB), api.login(CAROL)]);
    tokens.push(alice, bob, carol);
  });

  after(async function () {
    this.timeout(30_000);
    await env?.stop();
  });

  async function createUser(overrides: Record<string, unknown> = {}, token = alice) {
    const password = `pw-${unique()}-long-enough`;
    passwords.push(password);
    const body = {
      email: `user-${unique()}@acme.test`,
      full_name: "Test User",
      password,
      role: "member",
      ...overrides,
    };
    const res = await api.post("/v1/tenants/acme/users", { token, json: body });
    return { res, body };
  }

  async function createdUserId(overrides: Record<string, unknown> = {}): Promise<number> {
    const { res } = await createUser(overrides);
    expect(res.status, res.text).to.equal(201);
    return res.json.id as number;
  }

  describe("sessions", () => {
    it("creates a session: 201, Location, {id, access_token, token_type Bearer, expires_in}", async () => {
      const res = await api.post("/v1/tenants/acme/sessions", {
        json: { email: ALICE.email, password: DEMO_PASSWORD },
      });
      expect(res.status, res.text).to.equal(201);
      expect(Object.keys(res.json).sort()).to.deep.equal(SESSION_KEYS);
      expect(res.json.token_type).to.equal("Bearer");
      expect(res.json.id).to.be.a("string").and.match(/^ses_/);
      expect(res.headers.get("location")).to.equal(`/v1/tenants/acme/sessions/${res.json.id}`);
      expect(res.json.expires_in).to.be.a("number").and.satisfy(Number.isInteger).and.be.greaterThan(0);
      const token = res.json.access_token as string;
      tokens.push(token);
      expect(token.split(".")).to.have.length(3);
      const claims = jwtPayload(token);
      expect(claims.tid).to.equal("acme");
      expect(claims.role).to.equal("admin");
      expect((claims.exp as number) - (claims.iat as number)).to.equal(res.json.expires_in);
      // The token works.
      expect((await api.get("/v1/tenants/acme/users", { token })).status).to.equal(200);
    });

    it("finds the email without regard to case", async () => {
      const res = await api.post("/v1/tenants/acme/sessions", {
        json: { email: "ALICE@Acme.Test", password: DEMO_PASSWORD },
      });
      expect(res.status, res.text).to.equal(201);
      tokens.push(res.json.access_token as string);
    });

    for (const [what, tenant, email, password] of [
      ["a wrong password", "acme", ALICE.email, "not-the-password"],
      ["an unknown email", "acme", "nobody@acme.test", DEMO_PASSWORD],
      ["an unknown tenant", "initech", ALICE.email, DEMO_PASSWORD],
      ["a user of another tenant", "acme", CAROL.email, DEMO_PASSWORD],
      ["an empty password", "acme", ALICE.email, ""],
    ] as const) {
      it(`answers ${what} with 401 INVALID_CREDENTIALS and WWW-Authenticate: Bearer`, async () => {
        const res = await api.post(`/v1/tenants/${tenant}/sessions`, { json: { email, password } });
        expectUnauthenticated(res, "INVALID_CREDENTIALS");
        expect(res.text).not.to.include("access_token");
      });
    }

    it("refuses a session body with a missing field (400) or an unknown field (400)", async () => {
      expectError(
        await api.post("/v1/tenants/acme/sessions", { json: { email: ALICE.email } }),
        400,
        "INVALID_REQUEST",
      );
      expectError(
        await api.post("/v1/tenants/acme/sessions", {
          json: { email: ALICE.email, password: DEMO_PASSWORD, admin: true },
        }),
        400,
        "INVALID_REQUEST",
      );
    });
  });

  describe("users list", () => {
    before(async () => {
      // At least four users in acme, so limit=1 walks several pages.
      await createdUserId();
      await createdUserId();
    });

    it("walks every user with limit=1, following next_cursor and the Link header, newest first", async () => {
      const all = await api.listAll("/v1/tenants/acme/users", alice);
      expect(all.length).to.be.at.least(4);
      const emails = all.map((u) => u.email as string);
      expect(emails).to.include.members([ALICE.email, BOB.email]);
      expect(emails).not.to.include(CAROL.email);

      const walked: { id: number; created_at: string }[] = [];
      let path: string | null = "/v1/tenants/acme/users?limit=1";
      let pages = 0;
      while (path !== null) {
        const res = await api.get(path, { token: alice });
        expect(res.status, res.text).to.equal(200);
        expect(Object.keys(res.json).sort()).to.deep.equal(["items", "next_cursor"]);
        expect(res.json.items).to.have.length(1);
        walked.push(res.json.items[0]);
        pages++;
        // Besides rel="next", the v1 user routes link their successor and deprecation (API versions).
        const link = res.headers.get("link");
        expect(link ?? "").to.include('rel="successor-version"');
        if (res.json.next_cursor === null) {
          expect(link ?? "", "no next Link on the last page").not.to.include('rel="next"');
          path = null;
        } else {
          expect(res.json.next_cursor).to.be.a("string").and.not.equal("");
          const m = /^<([^>]+)>;\s*rel="next"(?:,|$)/.exec(link ?? "");
          expect(m, `Link header ${link}`).to.not.equal(null);
          const next = new URL(m![1]!, env.mesh.gatewayUrl);
          expect(next.pathname).to.equal("/v1/tenants/acme/users");
          expect(next.searchParams.get("cursor")).to.equal(res.json.next_cursor);
          expect(next.searchParams.get("limit")).to.equal("1");
          path = `${next.pathname}${next.search}`;
        }
        expect(pages).to.be.at.most(all.length);
      }
      expect(walked.map((u) => u.id)).to.deep.equal(all.map((u) => u.id as number));
      expect(new Set(walked.map((u) => u.id)).size).to.equal(walked.length);
      for (let i = 1; i < walked.length; i++) {
        const [prev, cur] = [walked[i - 1]!, walked[i]!];
        const order = Date.parse(prev.created_at) - Date.parse(cur.created_at) || prev.id - cur.id;
        expect(order, "newest first by (created_at, id)").to.be.greaterThan(0);
      }
    });

    it("is refused to another tenant's token (403 TENANT_MISMATCH) and to no token (401)", async () => {
      expectError(await api.get("/v1/tenants/acme/users", { token: carol }), 403, "TENANT_MISMATCH");
      expectUnauthenticated(await api.get("/v1/tenants/acme/users"));
    });

    it("refuses a malformed cursor and a bad limit with 400", async () => {
      expectError(await api.get("/v1/tenants/acme/users?cursor=not*a*cursor", { token: alice }), 400, "INVALID_CURSOR");
      expectError(await api.get("/v1/tenants/acme/users?limit=0", { token: alice }), 400, "INVALID_REQUEST");
      expectError(await api.get("/v1/tenants/acme/users?limit=101", { token: alice }), 400, "INVALID_REQUEST");
    });

    it("refuses a cursor of another tenant's list with 400", async () => {
      // globex has only carol, so make it page: create one more globex user.
      const created = await api.post("/v1/tenants/globex/users", {
        token: carol,
        json: { email: `g-${unique()}@globex.test`, full_name: "G", password: "globex-password-1" },
      });
      passwords.push("globex-password-1");
      expect(created.status, created.text).to.equal(201);
      const page = await api.get("/v1/tenants/globex/users?limit=1", { token: carol });
      expect(page.json.next_cursor).to.be.a("string");
      expectError(
        await api.get(`/v1/tenants/acme/users?limit=1&cursor=${page.json.next_cursor}`, { token: alice }),
        400,
        "INVALID_CURSOR",
      );
    });
  });

  describe("creating users", () => {
    it("lets an admin create a user: 201 + Location, and GET Location returns it", async () => {
      const { res, body } = await createUser({ full_name: "Dana Example", role: "admin" });
      expect(res.status, res.text).to.equal(201);
      expect(Object.keys(res.json).sort()).to.deep.equal(USER_KEYS);
      expect(res.json.id).to.be.a("number").and.satisfy(Number.isSafeInteger);
      expect(res.json).to.include({ email: body.email, full_name: "Dana Example", role: "admin" });
      expect(Date.parse(res.json.created_at)).to.be.closeTo(Date.now(), 60_000);
      const location = res.headers.get("location");
      expect(location).to.equal(`/v1/tenants/acme/users/${res.json.id}`);
      const got = await api.get(location!, { token: alice });
      expect(got.status, got.text).to.equal(200);
      expect(got.json).to.deep.equal(res.json);
      // The new user can log in with the password it was given.
      tokens.push(await api.login({ tenant: "acme", email: body.email }, body.password));
    });

    it("makes a user a member when no role is given", async () => {
      const { res } = await createUser({ role: undefined });
      expect(res.status, res.text).to.equal(201);
      expect(res.json.role).to.equal("member");
    });

    it("refuses a member (403 ROLE_REQUIRED) and creates nothing", async () => {
      const { res, body } = await createUser({}, bob);
      expectError(res, 403, "ROLE_REQUIRED");
      const emails = (await api.listAll("/v1/tenants/acme/users", alice)).map((u) => u.email);
      expect(emails).not.to.include(body.email);
    });

    it("refuses another tenant's admin (403 TENANT_MISMATCH) and creates nothing", async () => {
      const { res, body } = await createUser({}, carol);
      expectError(res, 403, "TENANT_MISMATCH");
      const emails = (await api.listAll("/v1/tenants/acme/users", alice)).map((u) => u.email);
      expect(emails).not.to.include(body.email);
    });

    it("refuses a duplicate email with 409 ALREADY_EXISTS, also in another case", async () => {
      const { res, body } = await createUser();
      expect(res.status, res.text).to.equal(201);
      const before = await api.listAll("/v1/tenants/acme/users", alice);
      expectError((await createUser({ email: body.email })).res, 409, "ALREADY_EXISTS");
      expectError((await createUser({ email: body.email.toUpperCase() })).res, 409, "ALREADY_EXISTS");
      expectError((await createUser({ email: ALICE.email })).res, 409, "ALREADY_EXISTS");
      expect(await api.listAll("/v1/tenants/acme/users", alice)).to.deep.equal(before);
    });

    it("answers a too-short password with 422 RULE_VIOLATION", async () => {
      expectError((await createUser({ password: "short" })).res, 422, "RULE_VIOLATION");
    });

    it("answers a well-typed but invalid email or role with 422", async () => {
      expectError((await createUser({ email: "not-an-email" })).res, 422, "RULE_VIOLATION");
      expectError((await createUser({ role: "owner" })).res, 422, "RULE_VIOLATION");
    });

    for (const [what, body] of [
      ["a missing field", { email: "x@acme.test", full_name: "X" }],
      ["an unknown field", { email: "x@acme.test", full_name: "X", password: "long-enough-password", is_admin: true }],
      ["a wrong type", { email: "x@acme.test", full_name: 42, password: "long-enough-password" }],
      ["a null value", { email: null, full_name: "X", password: "long-enough-password" }],
    ] as const) {
      it(`answers ${what} with 400 INVALID_REQUEST, before looking at the credential`, async () => {
        const before = await api.listAll("/v1/tenants/acme/users", alice);
        expectError(await api.post("/v1/tenants/acme/users", { token: alice, json: body }), 400, "INVALID_REQUEST");
        // Syntax comes before authentication and permission: a member and no token get the same 400.
        expectError(await api.post("/v1/tenants/acme/users", { token: bob, json: body }), 400, "INVALID_REQUEST");
        expectError(await api.post("/v1/tenants/acme/users", { json: body }), 400, "INVALID_REQUEST");
        expect(await api.listAll("/v1/tenants/acme/users", alice)).to.deep.equal(before);
      });
    }
  });

  describe("deleting users", () => {
    it("deletes: 204 without a body, then GET 404 and DELETE again 404", async () => {
      const id = await createdUserId();
      const res = await api.delete(`/v1/tenants/acme/users/${id}`, { token: alice });
      expect(res.status, res.text).to.equal(204);
      expect(res.text).to.equal("");
      expectError(await api.get(`/v1/tenants/acme/users/${id}`, { token: alice }), 404, "NOT_FOUND");
      expectError(await api.delete(`/v1/tenants/acme/users/${id}`, { token: alice }), 404, "NOT_FOUND");
      const ids = (await api.listAll("/v1/tenants/acme/users", alice)).map((u) => u.id);
      expect(ids).not.to.include(id);
    });

    it("a deleted user can no longer log in, and the email can be used again", async () => {
      const { res, body } = await createUser();
      expect(res.status).to.equal(201);
      expect((await api.delete(`/v1/tenants/acme/users/${res.json.id}`, { token: alice })).status).to.equal(204);
      expectUnauthenticated(
        await api.post("/v1/tenants/acme/sessions", { json: { email: body.email, password: body.password } }),
        "INVALID_CREDENTIALS",
      );
      const again = await createUser({ email: body.email });
      expect(again.res.status, again.res.text).to.equal(201);
      expect(again.res.json.id).not.to.equal(res.json.id);
    });

    it("answers DELETE of a user that never existed with 404", async () => {
      expectError(await api.delete("/v1/tenants/acme/users/987654321", { token: alice }), 404, "NOT_FOUND");
    });

    it("answers no token with 401 and WWW-Authenticate: Bearer, and deletes nothing", async () => {
      const id = await createdUserId();
      expectUnauthenticated(await api.delete(`/v1/tenants/acme/users/${id}`));
      expect((await api.get(`/v1/tenants/acme/users/${id}`, { token: alice })).status).to.equal(200);
    });

    it("answers another tenant's token with 403 TENANT_MISMATCH, and the user still exists", async () => {
      const id = await createdUserId();
      expectError(await api.delete(`/v1/tenants/acme/users/${id}`, { token: carol }), 403, "TENANT_MISMATCH");
      const got = await api.get(`/v1/tenants/acme/users/${id}`, { token: alice });
      expect(got.status, got.text).to.equal(200);
      expect(got.json.id).to.equal(id);
    });

    it("answers a member with 403 ROLE_REQUIRED, and the user still exists", async () => {
      const id = await createdUserId();
      expectError(await api.delete(`/v1/tenants/acme/users/${id}`, { token: bob }), 403, "ROLE_REQUIRED");
      expect((await api.get(`/v1/tenants/acme/users/${id}`, { token: alice })).status).to.equal(200);
    });

    it("never shows another tenant's user: carol's id under acme is 404", async () => {
      const globex = await api.listAll("/v1/tenants/globex/users", carol);
      const carolUser = globex.find((u) => u.email === CAROL.email);
      expect(carolUser).to.not.equal(undefined);
      const res = await api.get(`/v1/tenants/acme/users/${carolUser.id}`, { token: alice });
      expectError(res, 404, "NOT_FOUND");
      expect(res.text).not.to.include(CAROL.email);
      expectError(await api.delete(`/v1/tenants/acme/users/${carolUser.id}`, { token: alice }), 404, "NOT_FOUND");
      expect((await api.get(`/v1/tenants/globex/users/${carolUser.id}`, { token: carol })).status).to.equal(200);
    });
  });

  describe("bad credentials", () => {
    let victim: number;
    before(async () => {
      victim = await createdUserId();
    });
    afterEach(async () => {
      // Whatever a forged credential tried, the user is still there.
      expect((await api.get(`/v1/tenants/acme/users/${victim}`, { token: alice })).status).to.equal(200);
    });

    /** Alice's token with its payload replaced, signature kept. */
    function tampered(token: string, change: (claims: Record<string, unknown>) => void): string {
      const [header, , signature] = token.split(".");
      const claims = jwtPayload(token);
      change(claims);
      return `${header}.${b64url(claims)}.${signature}`;
    }

    const cases: [string, () => string | undefined, string?][] = [
      ["a garbage token", () => "garbage"],
      ["a garbage three-part token", () => "aaa.bbb.ccc"],
      ["a token with alg none", () => `${b64url({ alg: "none", typ: "JWT" })}.${b64url(jwtPayload(alice))}.`],
      [
        "a token with alg none and a copied signature",
        () => `${b64url({ alg: "none", typ: "JWT" })}.${b64url(jwtPayload(alice))}.${alice.split(".")[2]}`,
      ],
      // Real expiry (TOKEN_TTL_SECONDS ≥ 60) is covered by the TokenVerifier unit tests
      // (services/platform/test/auth.test.ts); here: a token whose exp was pushed out is refused.
      ["a token whose exp was changed", () => tampered(alice, (c) => void (c.exp = (c.exp as number) + 3_600))],
      ["a token whose exp was moved into the past", () => tampered(alice, (c) => void (c.exp = 1_000_000_000))],
      ["a member's token whose role was changed to admin", () => tampered(bob, (c) => void (c.role = "admin"))],
      ["a globex token whose tenant was changed to acme", () => tampered(carol, (c) => void (c.tid = "acme"))],
      ["a token with its signature cut off", () => alice.split(".").slice(0, 2).join(".") + "."],
    ];
    for (const [what, token] of cases) {
      it(`answers ${what} with 401 and WWW-Authenticate: Bearer on DELETE and GET`, async () => {
        const t = token()!;
        expectUnauthenticated(await api.delete(`/v1/tenants/acme/users/${victim}`, { token: t }));
        expectUnauthenticated(await api.get(`/v1/tenants/acme/users/${victim}`, { token: t }));
        expectUnauthenticated(await api.get("/v1/payments", { token: t }));
      });
    }

    it("answers a non-Bearer Authorization header with 401", async () => {
      expectUnauthenticated(
        await api.delete(`/v1/tenants/acme/users/${victim}`, {
          headers: { authorization: `Basic ${Buffer.from(`${ALICE.email}:${DEMO_PASSWORD}`).toString("base64")}` },
        }),
      );
      expectUnauthenticated(
        await api.delete(`/v1/tenants/acme/users/${victim}`, { headers: { authorization: "Bearer" } }),
      );
      expectUnauthenticated(
        await api.delete(`/v1/tenants/acme/users/${victim}`, { headers: { authorization: `Bearer ${alice} extra` } }),
      );
    });
  });

  describe("malformed user ids", () => {
    for (const id of ["abc", "0", "-1", "1.5", "99999999999999999999", "9007199254740992"]) {
      it(`answers /users/${id} with 400, whatever the credential`, async () => {
        for (const token of [alice, carol, undefined]) {
          expectError(await api.get(`/v1/tenants/acme/users/${id}`, { token }), 400, "INVALID_REQUEST");
          expectError(await api.delete(`/v1/tenants/acme/users/${id}`, { token }), 400, "INVALID_REQUEST");
        }
      });
    }

    it("answers a malformed tenant id with 400", async () => {
      expectError(await api.get("/v1/tenants/ACME/users", { token: alice }), 400, "INVALID_REQUEST");
    });
  });

  // Last: everything above has produced its responses and log lines.
  describe("secrets", () => {
    const FORBIDDEN = [
      /password_hash/i,
      /passwordHash/i,
      /is_deleted/i,
      /internal_risk_score/i,
      /internalRiskScore/i,
      /risk_score/i,
      /scrypt\$/,
    ];

    it("no response body in this file carried a hash, a deletion flag or a risk score", () => {
      expect(api.seen.length).to.be.greaterThan(100);
      for (const text of api.seen) {
        for (const pattern of FORBIDDEN) expect(text, `a response matched ${pattern}`).not.to.match(pattern);
        for (const password of passwords) expect(text, "a response echoed a password").not.to.include(password);
      }
    });

    it("no process wrote a hash, a password or an access token to its log", () => {
      const logs = env.mesh.logs.join("");
      expect(logs.length, "the processes logged something").to.be.greaterThan(0);
      expect(logs).not.to.include("scrypt$");
      for (const password of passwords) expect(logs, "a password in the logs").not.to.include(password);
      expect(tokens.length).to.be.greaterThan(3);
      for (const token of tokens) {
        expect(logs, "an access token in the logs").not.to.include(token);
        expect(logs, "an access token's signature in the logs").not.to.include(token.split(".")[2]!);
      }
    });
  });
});
