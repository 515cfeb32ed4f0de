// IdentityService and OperatorService RPC handlers: proto in, proto out. Rules live in domain/,
// storage behind the port.
import { randomUUID } from "node:crypto";
import type { ServiceImpl } from "@connectrpc/connect";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import type { OperatorService } from "@switchyard/gen/switchyard/identity/v1/operator_pb.js";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { fail } from "@switchyard/platform/errors.js";
import { callFields, type Logger } from "@switchyard/platform/logger.js";
import { requireRole, requireTenant } from "@switchyard/platform/caller.js";
import { callerOf, callScopeOf, clientAddressOf, serviceCallerOf } from "@switchyard/platform/grpc";
import { AsyncQueue } from "@switchyard/platform/async-queue.js";
import { decodeCursor, pageOf, pageSizeOf } from "@switchyard/platform/paging.js";
import { validateNewTenant } from "./domain/tenants.js";
import { isTenantId, normalizeEmail, validateNewUser } from "./domain/users.js";
import { ownSession } from "./domain/sessions.js";
import { accessTokenClaims, SERVICE_TOKEN_TTL_SECONDS, serviceTokenClaims } from "./domain/tokens.js";
import type { LoginThrottle } from "./login-throttle.js";
import type { RevocationHub } from "./revocation-hub.js";
import { burnPasswordCheck, hashPassword, needsRehash, verifyPassword } from "./passwords.js";
import { roleFromProto, sessionToProto, tenantToProto, userToProto } from "./proto-mapping.js";
import { isServiceClient, type ServiceClients } from "./service-clients.js";
import type { KeyRing } from "./signing-keys.js";
import type { IdentityStore, RevocationRecord, UserRecord } from "./store/port.js";

export interface IdentityDeps {
  store: IdentityStore;
  keys: KeyRing;
  tokenTtlSeconds: number;
  serviceClients: ServiceClients;
  throttle: LoginThrottle;
  revocations: RevocationHub;
  now?: () => number;
}

const usersCollection = (tenantId: string) => `users:${tenantId}`;
const SESSION_ID = /^ses_[0-9a-f]{32}$/;

function tenantIdOf(raw: string): string {
  if (!isTenantId(raw)) throw fail("INVALID_REQUEST", "tenant_id must be a lower-case slug");
  return raw;
}

function userIdOf(raw: bigint): bigint {
  if (raw <= 0n) throw fail("INVALID_REQUEST", "user_id must be a positive integer");
  return raw;
}

/** The user of this email whose password this is; none otherwise, after as long a check. */
async function userWithPassword(
  store: IdentityStore,
  tenantId: string,
  email: string,
  password: string,
): Promise<UserRecord | undefined> {
  // An email that no stored one can equal (empty, or with a NUL the database cannot hold) matches nobody.
  const findable = isTenantId(tenantId) && email !== "" && !email.includes("\u0000");
  const user = findable ? await store.findUserByEmail(tenantId, normalizeEmail(email)) : undefined;
  if (!user) {
    await burnPasswordCheck(password);
    return undefined;
  }
  return (await verifyPassword(password, user.passwordHash)) ? user : undefined;
}

export function identityHandlers(deps: IdentityDeps): ServiceImpl<typeof IdentityService> {
  const { store, keys } = deps;
  const now = deps.now ?? Date.now;

  return {
    async createSession(req, ctx) {
      const tenantId = req.tenantId;
      const address = clientAddressOf(ctx);
      // Counted before any password is checked, and refused while throttled — alike for accounts that do not exist.
      const attempt = await deps.throttle.begin(tenantId, req.email, address);
      // Not judged when the check is shed or the store fails: the attempt then counts as nothing.
      const user = await userWithPassword(store, tenantId, req.email, req.password).catch(async (err: unknown) => {
        await attempt.abandoned();
        throw err;
      });
      if (!user) {
        await attempt.failed();
        throw fail("INVALID_CREDENTIALS", "email or password is wrong");
      }
      await attempt.succeeded();
      // A hash made with older parameters is replaced while the password is at hand.
      if (needsRehash(user.passwordHash))
        await store.updatePasswordHash(tenantId, user.id, await hashPassword(req.password));
      const sessionId = `ses_${randomUUID().replaceAll("-", "")}`;
      const issuedAt = Math.floor(now() / 1000);
      const accessToken = await keys.sign(
        accessTokenClaims({ tenantId, userId: user.id, role: user.role, sessionId }, issuedAt, deps.tokenTtlSeconds),
      );
      await store.recordSession({
        id: sessionId,
        tenantId,
        userId: user.id,
        expiresAt: new Date((issuedAt + deps.tokenTtlSeconds) * 1000),
      });
      return {
        sessionId,
        accessToken,
        tokenType: "Bearer",
        expiresInSeconds: deps.tokenTtlSeconds,
        user: userToProto(user),
      };
    },

    async getSession(req, ctx) {
      const caller = callerOf(ctx);
      requireTenant(caller, tenantIdOf(req.tenantId));
      // An id that is no session id (of the form issued below) names nothing: 404 without a lookup.
      const found = SESSION_ID.test(req.sessionId) ? await store.getSession(req.tenantId, req.sessionId) : undefined;
      return { session: sessionToProto(ownSession(caller, found)) };
    },

    async createServiceToken(req) {
      if (!isServiceClient(deps.serviceClients, req.clientId, req.clientSecret))
        throw fail("INVALID_CREDENTIALS", "client id or secret is wrong");
      const accessToken = await keys.sign(serviceTokenClaims(req.clientId, Math.floor(now() / 1000)));
      return { accessToken, expiresInSeconds: SERVICE_TOKEN_TTL_SECONDS };
    },

    async deleteSession(req, ctx) {
      const caller = callerOf(ctx);
      requireTenant(caller, tenantIdOf(req.tenantId));
      // Only one's own sessions, as for reading them. Logging out twice is done twice: 204 again.
      const found = SESSION_ID.test(req.sessionId) ? await store.getSession(req.tenantId, req.sessionId) : undefined;
      const session = ownSession(caller, found);
      await store.revokeSession(req.tenantId, session.id, callScopeOf(ctx));
      return {};
    },

    async *watchRevocations(_req, ctx) {
      // Subscribe before reading what stands, so nothing committed in between is missed (a session
      // announced twice is harmless).
      const live = new AsyncQueue<RevocationRecord>();
      const unsubscribe = deps.revocations.subscribe((r) => live.push(r));
      const end = () => live.close();
      ctx.signal.addEventListener("abort", end, { once: true });
      const message = (r: RevocationRecord) => ({
        revocation: { sessionId: r.sessionId, expireTime: timestampFromDate(r.expiresAt) },
      });
      try {
        for (const r of await store.liveRevocations()) yield message(r);
        yield { synced: true };
        for await (const r of live) yield message(r);
      } finally {
        unsubscribe();
        ctx.signal.removeEventListener("abort", end);
      }
    },

    getJwks() {
      return {
        keys: keys.publicKeys().map((k) => ({
          kid: k.kid ?? "",
          kty: k.kty ?? "",
          crv: k.crv ?? "",
          x: k.x ?? "",
          alg: k.alg ?? "",
          use: k.use ?? "",
        })),
      };
    },

    async getTenant(req, ctx) {
      const caller = callerOf(ctx);
      requireTenant(caller, tenantIdOf(req.tenantId));
      const tenant = await store.getTenant(req.tenantId);
      if (!tenant) throw fail("NOT_FOUND", "tenant not found");
      return { tenant: tenantToProto(tenant) };
    },

    async listUsers(req, ctx) {
      const caller = callerOf(ctx);
      const tenantId = tenantIdOf(req.tenantId);
      requireTenant(caller, tenantId);
      const size = pageSizeOf(req.pageSize);
      const after = decodeCursor(usersCollection(tenantId), req.pageToken, "number");
      const rows = await store.listUsers(tenantId, after, size + 1);
      const page = pageOf(rows, size, {
        collection: usersCollection(tenantId),
        keyOf: (u) => ({ createdAt: u.createdAt, id: u.id.toString() }),
      });
      return { users: page.items.map(userToProto), nextPageToken: page.nextCursor };
    },

    async createUser(req, ctx) {
      const caller = callerOf(ctx);
      const tenantId = tenantIdOf(req.tenantId);
      requireTenant(caller, tenantId);
      requireRole(caller, "admin");
      const valid = validateNewUser({
        email: req.email,
        fullName: req.fullName,
        givenName: req.givenName,
        familyName: req.familyName,
        password: req.password,
        role: roleFromProto(req.role),
      });
      const user = await store.createUser({
        tenantId,
        email: valid.email,
        fullName: valid.fullName,
        givenName: valid.name.given,
        familyName: valid.name.family,
        role: valid.role,
        passwordHash: await hashPassword(valid.password),
      });
      return { user: userToProto(user) };
    },

    async getUser(req, ctx) {
      const caller = callerOf(ctx);
      const tenantId = tenantIdOf(req.tenantId);
      requireTenant(caller, tenantId);
      const user = await store.getUser(tenantId, userIdOf(req.userId));
      if (!user) throw fail("NOT_FOUND", "user not found");
      return { user: userToProto(user) };
    },

    async deleteUser(req, ctx) {
      const caller = callerOf(ctx);
      const tenantId = tenantIdOf(req.tenantId);
      requireTenant(caller, tenantId);
      requireRole(caller, "admin");
      if (!(await store.deleteUser(tenantId, userIdOf(req.userId), callScopeOf(ctx))))
        throw fail("NOT_FOUND", "user not found");
      return {};
    },
  };
}

export interface OperatorDeps {
  store: IdentityStore;
  logger: Logger;
}

export function operatorHandlers(deps: OperatorDeps): ServiceImpl<typeof OperatorService> {
  return {
    async createTenant(req, ctx) {
      // Only the operator gets here (operatorCallPolicy).
      const { service } = serviceCallerOf(ctx);
      const valid = validateNewTenant(req);
      const call = callScopeOf(ctx);
      const { tenant, admin } = await deps.store.createTenantWithAdmin(
        { id: valid.id, displayName: valid.displayName },
        {
          email: valid.admin.email,
          fullName: valid.admin.fullName,
          givenName: valid.admin.name.given,
          familyName: valid.admin.name.family,
          passwordHash: await hashPassword(valid.admin.password),
        },
        call,
      );
      // The audit trail of who made which tenant: ids only, never the admin's email or password.
      deps.logger.info(
        { ...callFields(call), tenantId: tenant.id, adminUserId: admin.id.toString(), by: service },
        "tenant created with its first admin",
      );
      return { tenant: tenantToProto(tenant), admin: userToProto(admin) };
    },
  };
}
