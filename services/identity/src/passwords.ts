// Password hashing: Argon2id at OWASP's parameters (19 MiB, 2 passes, 1 lane; @node-rs/argon2 runs
// it on libuv's thread pool, off the event loop). Hashes made before — scrypt$<log2 N>$<r>$<p>$<salt>$<hash>,
// or Argon2id with weaker parameters — still verify, and say they need a new hash, which the next
// successful login stores. Hashing is bounded: a few at a time, a short queue behind them, and past
// that a login is shed (503) at once instead of starving the service.
import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from "node:crypto";
import { hash as argon2Hash, verify as argon2Verify } from "@node-rs/argon2";
import { fail } from "@switchyard/platform/errors.js";

/** OWASP Password Storage Cheat Sheet: Argon2id, m = 19 MiB, t = 2, p = 1. */
// algorithm 2 is Argon2id (the package's const enum Algorithm.Argon2id, which isolated modules cannot read).
export const ARGON2_PARAMETERS = { algorithm: 2, memoryCost: 19 * 1024, timeCost: 2, parallelism: 1 } as const;
const CURRENT_PREFIX = `$argon2id$v=19$m=${ARGON2_PARAMETERS.memoryCost},t=${ARGON2_PARAMETERS.timeCost},p=${ARGON2_PARAMETERS.parallelism}$`;

/** Hashes running at once (each holds 19 MiB and a pool thread), and calls that may wait for one. */
const CONCURRENT_HASHES = 4;
const WAITING_HASHES = 32;

class HashGate {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.running >= CONCURRENT_HASHES) {
      if (this.waiting.length >= WAITING_HASHES)
        throw fail("LOAD_SHED", "too many logins at once; retry after the Retry-After delay");
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.running++;
    }
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}

const gate = new HashGate();

export function hashPassword(password: string): Promise<string> {
  return gate.run(() => argon2Hash(password.normalize("NFC"), ARGON2_PARAMETERS));
}

/** A stored scrypt hash's cost: N = 2^logN, the block size r, the parallelism p. */
interface ScryptCost {
  logN: number;
  r: number;
  p: number;
}

function deriveScrypt(password: string, salt: Buffer, { logN, r, p }: ScryptCost): Promise<Buffer> {
  const options: ScryptOptions = { N: 2 ** logN, r, p, maxmem: 256 * 2 ** logN * r + 1024 * 1024 };
  return new Promise((resolve, reject) =>
    scrypt(password.normalize("NFC"), salt, 32, options, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

async function verifyScrypt(password: string, encoded: string): Promise<boolean> {
  const [, logN, r, p, salt, hash] = encoded.split("$");
  if (!logN || !r || !p || !salt || !hash || !/^\d{1,2}$/.test(logN) || !/^\d{1,2}$/.test(r) || !/^\d{1,2}$/.test(p))
    return false;
  const expected = Buffer.from(hash, "base64url");
  const cost = { logN: Number(logN), r: Number(r), p: Number(p) };
  const actual = await deriveScrypt(password, Buffer.from(salt, "base64url"), cost);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

export function verifyPassword(password: string, encoded: string): Promise<boolean> {
  return gate.run(async () => {
    if (encoded.startsWith("$argon2")) return argon2Verify(encoded, password.normalize("NFC")).catch(() => false);
    if (encoded.startsWith("scrypt$")) return verifyScrypt(password, encoded);
    return false;
  });
}

/** Whether a stored hash was made with other parameters than today's (then the next login stores a new one). */
export function needsRehash(encoded: string): boolean {
  return !encoded.startsWith(CURRENT_PREFIX);
}

// Checked when the account is unknown, so a wrong email costs as long as a wrong password.
let decoy: Promise<string> | undefined;
export async function burnPasswordCheck(password: string): Promise<void> {
  decoy ??= argon2Hash(randomBytes(16).toString("base64url"), ARGON2_PARAMETERS);
  await verifyPassword(password, await decoy);
}
