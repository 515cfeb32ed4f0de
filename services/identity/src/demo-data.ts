// Demo tenants and users for `npm start` on embedded storage only (never in deploy/).
import type { Role } from "@switchyard/platform/caller.js";
import { hashPassword } from "./passwords.js";
import type { IdentityStore } from "./store/port.js";

export const DEMO_PASSWORD = "demo-password";

export const DEMO_USERS: {
  tenantId: string;
  email: string;
  fullName: string;
  givenName: string;
  familyName: string;
  role: Role;
}[] = [
  {
    tenantId: "acme",
    email: "alice@acme.test",
    fullName: "Alice Example",
    givenName: "Alice",
    familyName: "Example",
    role: "admin",
  },
  {
    tenantId: "acme",
    email: "bob@acme.test",
    fullName: "Bob Example",
    givenName: "Bob",
    familyName: "Example",
    role: "member",
  },
  {
    tenantId: "globex",
    email: "carol@globex.test",
    fullName: "Carol Example",
    givenName: "Carol",
    familyName: "Example",
    role: "admin",
  },
];

const DEMO_TENANTS = [
  { id: "acme", displayName: "Acme Corporation" },
  { id: "globex", displayName: "Globex Corporation" },
];

/**
 * Idempotent: a second start finds the demo users and leaves them as they are — also when replicas
 * starting together on one (test) server race to make the same user: the loser finds it made.
 */
export async function seedDemoData(store: IdentityStore): Promise<void> {
  for (const tenant of DEMO_TENANTS) await store.upsertTenant(tenant);
  for (const user of DEMO_USERS) {
    if (await store.findUserByEmail(user.tenantId, user.email)) continue;
    const passwordHash = await hashPassword(DEMO_PASSWORD);
    await store.createUser({ ...user, passwordHash }).catch(async (err: unknown) => {
      if (!(await store.findUserByEmail(user.tenantId, user.email))) throw err;
    });
  }
}
