// /v1/tenants/…: sessions and users, translated to IdentityService calls.
import type { RouteGroup } from "../runtime/route.js";
import { cursorParam, listResult, pageSizeParam } from "../runtime/pagination.js";
import { roleFromName, sessionJson, sessionResourceJson, userJson } from "../representations/identity.js";

interface SessionBody {
  email: string;
  password: string;
}
/** v1 names a user whole (full_name), v2 in parts (name); the document of each version says which. */
interface UserBody {
  email: string;
  full_name?: string;
  name?: { given: string; family: string };
  password: string;
  role?: string;
}

export const identityRoutes: RouteGroup = {
  upstream: "identity",
  handlers: {
    async createSession({ params, body, upstreams, callOptions, base }) {
      const tenantId = params.tenant_id as string;
      const { email, password } = body as SessionBody;
      const session = await upstreams.identity.createSession({ tenantId, email, password }, callOptions());
      return {
        status: 201,
        body: sessionJson(session),
        headers: { location: `${base}/tenants/${tenantId}/sessions/${session.sessionId}` },
      };
    },

    async getSession({ params, upstreams, callOptions }) {
      const { session } = await upstreams.identity.getSession(
        { tenantId: params.tenant_id as string, sessionId: params.session_id as string },
        callOptions(),
      );
      return { status: 200, body: sessionResourceJson(session!) };
    },

    async deleteSession({ params, upstreams, callOptions }) {
      await upstreams.identity.deleteSession(
        { tenantId: params.tenant_id as string, sessionId: params.session_id as string },
        callOptions(),
      );
      return { status: 204 };
    },

    async listUsers({ params, upstreams, callOptions, path, version }) {
      const res = await upstreams.identity.listUsers(
        {
          tenantId: params.tenant_id as string,
          pageSize: pageSizeParam(params.limit),
          pageToken: cursorParam(params.cursor),
        },
        callOptions(),
      );
      return listResult(
        path,
        params.limit,
        res.users.map((u) => userJson(u, version)),
        res.nextPageToken,
      );
    },

    async createUser({ params, body, upstreams, callOptions, version, base }) {
      const tenantId = params.tenant_id as string;
      const input = body as UserBody;
      const name = input.name
        ? { givenName: input.name.given, familyName: input.name.family }
        : { fullName: input.full_name ?? "" };
      const { user } = await upstreams.identity.createUser(
        { tenantId, email: input.email, ...name, password: input.password, role: roleFromName(input.role) },
        callOptions(),
      );
      return {
        status: 201,
        body: userJson(user!, version),
        headers: { location: `${base}/tenants/${tenantId}/users/${user!.id}` },
      };
    },

    async getUser({ params, upstreams, callOptions, version }) {
      const { user } = await upstreams.identity.getUser(
        { tenantId: params.tenant_id as string, userId: BigInt(params.user_id as number) },
        callOptions(),
      );
      return { status: 200, body: userJson(user!, version) };
    },

    async deleteUser({ params, upstreams, callOptions }) {
      await upstreams.identity.deleteUser(
        { tenantId: params.tenant_id as string, userId: BigInt(params.user_id as number) },
        callOptions(),
      );
      return { status: 204 };
    },
  },
};
