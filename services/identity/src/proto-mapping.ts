// Internal records → proto messages. Explicit, field by field: the hash, the risk score and the
// deletion state have no place in a User message, so they cannot leak through it.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  Role as ProtoRole,
  SessionSchema,
  TenantSchema,
  UserSchema,
  type Session,
  type Tenant,
  type User,
} from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import type { Role } from "@switchyard/platform/caller.js";
import type { SessionRecord, TenantRecord, UserRecord } from "./store/port.js";

export function roleToProto(role: Role): ProtoRole {
  return role === "admin" ? ProtoRole.ADMIN : ProtoRole.MEMBER;
}

/** ROLE_UNSPECIFIED → undefined (the default applies); an unknown number is refused by the caller. */
export function roleFromProto(role: ProtoRole): Role | undefined | "invalid" {
  switch (role) {
    case ProtoRole.UNSPECIFIED:
      return undefined;
    case ProtoRole.ADMIN:
      return "admin";
    case ProtoRole.MEMBER:
      return "member";
    default:
      return "invalid";
  }
}

export function userToProto(user: UserRecord): User {
  return create(UserSchema, {
    id: user.id,
    tenantId: user.tenantId,
    email: user.email,
    fullName: user.fullName,
    givenName: user.givenName,
    familyName: user.familyName,
    role: roleToProto(user.role),
    createTime: timestampFromDate(user.createdAt),
  });
}

export function tenantToProto(tenant: TenantRecord): Tenant {
  return create(TenantSchema, {
    id: tenant.id,
    displayName: tenant.displayName,
    createTime: timestampFromDate(tenant.createdAt),
  });
}

export function sessionToProto(s: SessionRecord): Session {
  return create(SessionSchema, {
    id: s.id,
    tenantId: s.tenantId,
    userId: s.userId,
    createTime: timestampFromDate(s.createdAt),
    expireTime: timestampFromDate(s.expiresAt),
  });
}
