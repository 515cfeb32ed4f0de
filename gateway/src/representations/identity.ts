// Public representations of identity resources: explicit field lists, never the proto as it is.
import {
  Role,
  type CreateSessionResponse,
  type Session,
  type User,
} from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { isoTime } from "@switchyard/platform/representations/time.js";

export function roleName(role: Role): "admin" | "member" {
  return role === Role.ADMIN ? "admin" : "member";
}

export function roleFromName(name: unknown): Role {
  if (name === "admin") return Role.ADMIN;
  if (name === "member") return Role.MEMBER;
  return Role.UNSPECIFIED;
}

/** A user as version `major` of the API shows one: v1 the whole name, v2 the name in parts. */
export function userJson(user: User, major = 1) {
  const name = major >= 2 ? { name: { given: user.givenName, family: user.familyName } } : { full_name: user.fullName };
  return {
    id: Number(user.id),
    email: user.email,
    ...name,
    role: roleName(user.role),
    created_at: isoTime(user.createTime),
  };
}

export function sessionJson(session: CreateSessionResponse) {
  return {
    id: session.sessionId,
    access_token: session.accessToken,
    token_type: session.tokenType,
    expires_in: session.expiresInSeconds,
  };
}

export function sessionResourceJson(s: Session) {
  return { id: s.id, user_id: Number(s.userId), created_at: isoTime(s.createTime), expires_at: isoTime(s.expireTime) };
}
