// What the identity service needs from storage. Records here are internal: they carry the
// password hash, the risk score and the deletion state, and never leave the service as they are.
import type { Role } from "@switchyard/platform/caller.js";
import type { Keyset } from "@switchyard/platform/paging.js";
import type { CallScope } from "@switchyard/platform/call-deadline.js";

export interface TenantRecord {
  id: string;
  displayName: string;
  createdAt: Date;
}

export interface UserRecord {
  id: bigint;
  tenantId: string;
  email: string;
  fullName: string;
  /** The name in parts (all of it the given name for a user made with a whole name only). */
  givenName: string;
  familyName: string;
  role: Role;
  passwordHash: string;
  internalRiskScore: number;
  createdAt: Date;
}

export interface SigningKeyRecord {
  kid: string;
  /** The Ed25519 private key's JWK JSON, sealed (AES-256-GCM) when a key-encryption key is configured. */
  privateJwk: string;
  /** JWK JSON of the public half, as published. */
  publicJwk: string;
  createdAt: Date;
  /** When it starts signing (it is published from the moment it exists). */
  activatesAt: Date;
}

/** What a key rotation does under the keys' lock: keys to add, keys to forget, private keys to store sealed. */
export interface SigningKeyChange {
  add?: { kid: string; privateJwk: string; publicJwk: string; activatesAt: Date };
  remove?: string[];
  reseal?: { kid: string; privateJwk: string }[];
}

export interface SessionRecord {
  id: string;
  tenantId: string;
  userId: bigint;
  createdAt: Date;
  expiresAt: Date;
}

/** A revoked session whose token has not expired yet. */
export interface RevocationRecord {
  sessionId: string;
  expiresAt: Date;
}

export interface IdentityStore {
  upsertTenant(tenant: { id: string; displayName: string }): Promise<TenantRecord>;
  getTenant(id: string): Promise<TenantRecord | undefined>;
  /** A new tenant and its first admin, both or neither: ALREADY_EXISTS, with nothing written, when the tenant exists. */
  createTenantWithAdmin(
    tenant: { id: string; displayName: string },
    admin: { email: string; fullName: string; givenName: string; familyName: string; passwordHash: string },
    call?: CallScope,
  ): Promise<{ tenant: TenantRecord; admin: UserRecord }>;
  /** Active (not deleted) users only. */
  findUserByEmail(tenantId: string, email: string): Promise<UserRecord | undefined>;
  getUser(tenantId: string, id: bigint): Promise<UserRecord | undefined>;
  /** Newest first; `after` is the keyset position of the previous page's last row. */
  listUsers(tenantId: string, after: Keyset | undefined, limit: number): Promise<UserRecord[]>;
  /** Fails with ALREADY_EXISTS when an active user of the tenant has the email. */
  createUser(user: {
    tenantId: string;
    email: string;
    fullName: string;
    givenName: string;
    familyName: string;
    role: Role;
    passwordHash: string;
  }): Promise<UserRecord>;
  /** Soft delete, revoking every session of the user (announced like revokeSession); false when there was no such active user. */
  deleteUser(tenantId: string, id: bigint, call?: CallScope): Promise<boolean>;
  /** Replaces a user's password hash (a stronger hash of the same password). */
  updatePasswordHash(tenantId: string, id: bigint, passwordHash: string): Promise<void>;
  recordSession(session: { id: string; tenantId: string; userId: bigint; expiresAt: Date }): Promise<void>;
  getSession(tenantId: string, id: string): Promise<SessionRecord | undefined>;
  /** Revokes one session; announced on the revocation channel when it commits. False when it was revoked already. */
  revokeSession(tenantId: string, id: string, call?: CallScope): Promise<boolean>;
  /** The revoked sessions whose tokens have not expired. */
  liveRevocations(): Promise<RevocationRecord[]>;
  /**
   * Calls `onRevoked` for every revocation any replica commits, and `onResync` when some may have gone
   * unannounced (the store's connection was lost); resolves to the stop function.
   */
  watchRevocations(
    onRevoked: (revocation: RevocationRecord) => void,
    onResync: () => void,
  ): Promise<() => Promise<void>>;
  /** The latest to sign first. */
  signingKeys(): Promise<SigningKeyRecord[]>;
  /**
   * Decides and applies a change of the keys under a lock that every replica takes to change them
   * (so two rotating at once add one key, not two); resolves to the keys as they are afterwards.
   */
  changeSigningKeys(
    decide: (keys: SigningKeyRecord[]) => Promise<SigningKeyChange> | SigningKeyChange,
  ): Promise<SigningKeyRecord[]>;
}
