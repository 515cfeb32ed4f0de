// The token signing key ring: Ed25519 keys kept in identity's own database (so replicas and
// restarts agree), their private halves sealed at rest when SIGNING_KEY_ENCRYPTION_KEY is set. Keys
// rotate (domain/key-rotation.ts): a new one is published before it signs, the retired one stays
// published until its last token has expired. Every replica reads the keys again each minute — and
// the one that finds a rotation due makes it, under the keys' lock — so all replicas publish and sign
// with the same keys.
import { randomUUID } from "node:crypto";
import { exportJWK, generateKeyPair, importJWK, SignJWT, type JWK } from "jose";
import type { Logger } from "@switchyard/platform/logger.js";
import { TOKEN_ALGORITHM } from "@switchyard/platform/caller.js";
import { planRotation, signingKeyOf, type RotationSettings } from "./domain/key-rotation.js";
import { isSealed, seal, unseal, type SealedKind } from "@switchyard/platform/sealing.js";
import type { IdentityStore, SigningKeyChange, SigningKeyRecord } from "./store/port.js";

const SIGNING_KEY: SealedKind = { what: "signing key", keySetting: "SIGNING_KEY_ENCRYPTION_KEY" };

export interface KeyRing {
  sign(claims: Record<string, unknown>): Promise<string>;
  publicKeys(): JWK[];
}

export interface KeyRingOptions extends RotationSettings {
  /** Seals private keys at rest; undefined: they are stored as they are (embedded storage only). */
  encryptionKey: Buffer | undefined;
  logger: Logger;
  now?: () => number;
  /** How often the keys are read again (and a due rotation made). */
  reloadMs?: number;
}

const RELOAD_MS = 60_000;

type LoadedKey = {
  kid: string;
  activatesAt: number;
  privateKey: Awaited<ReturnType<typeof importJWK>>;
  publicJwk: JWK;
};

export class RotatingKeyRing implements KeyRing {
  private keys: LoadedKey[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly now: () => number;

  private constructor(
    private readonly store: IdentityStore,
    private readonly options: KeyRingOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  /** Opens the ring: makes the first key (or a due one), seals keys stored in the clear, loads them. */
  static async open(store: IdentityStore, options: KeyRingOptions): Promise<RotatingKeyRing> {
    const ring = new RotatingKeyRing(store, options);
    await ring.refresh();
    ring.timer = setInterval(() => {
      ring
        .refresh()
        .catch((err: unknown) =>
          options.logger.warn(
            { message: String(err) },
            "could not read or rotate the signing keys; trying again in a minute",
          ),
        );
    }, options.reloadMs ?? RELOAD_MS);
    ring.timer.unref();
    return ring;
  }

  /** Reads the keys again, making a rotation that is due (and sealing any key stored in the clear). */
  async refresh(): Promise<void> {
    const records = await this.store.changeSigningKeys((current) => this.changeFor(current));
    this.keys = await Promise.all(records.map((r) => this.load(r)));
  }

  private async changeFor(current: SigningKeyRecord[]): Promise<SigningKeyChange> {
    const now = this.now();
    const plan = planRotation(
      current.map((k) => ({ kid: k.kid, activatesAt: k.activatesAt.getTime() })),
      now,
      this.options,
    );
    const change: SigningKeyChange = { remove: plan.remove };
    if (plan.addActivatingAt !== undefined) {
      const { privateKey, publicKey } = await generateKeyPair(TOKEN_ALGORITHM, { crv: "Ed25519", extractable: true });
      const kid = randomUUID();
      const meta = { kid, alg: TOKEN_ALGORITHM, use: "sig" };
      const privateJwk = JSON.stringify({ ...(await exportJWK(privateKey)), ...meta });
      change.add = {
        kid,
        privateJwk: this.sealed(privateJwk, kid),
        publicJwk: JSON.stringify({ ...(await exportJWK(publicKey)), ...meta }),
        activatesAt: new Date(plan.addActivatingAt),
      };
      this.options.logger.info(
        { kid, activatesAt: new Date(plan.addActivatingAt).toISOString() },
        "made a new signing key; published now, signing from its activation",
      );
    }
    const { encryptionKey } = this.options;
    if (encryptionKey)
      change.reseal = current
        .filter((k) => !isSealed(k.privateJwk))
        .map((k) => ({ kid: k.kid, privateJwk: seal(k.privateJwk, k.kid, encryptionKey) }));
    if (plan.remove.length > 0)
      this.options.logger.info({ kids: plan.remove }, "forgot signing keys whose tokens have all expired");
    return change;
  }

  private sealed(privateJwk: string, kid: string): string {
    return this.options.encryptionKey ? seal(privateJwk, kid, this.options.encryptionKey) : privateJwk;
  }

  private async load(record: SigningKeyRecord): Promise<LoadedKey> {
    let privateJwk = record.privateJwk;
    if (isSealed(privateJwk)) {
      if (!this.options.encryptionKey)
        throw new Error(`signing key ${record.kid} is sealed, and SIGNING_KEY_ENCRYPTION_KEY is not set`);
      privateJwk = unseal(privateJwk, record.kid, this.options.encryptionKey, SIGNING_KEY);
    }
    return {
      kid: record.kid,
      activatesAt: record.activatesAt.getTime(),
      privateKey: await importJWK(JSON.parse(privateJwk) as JWK, TOKEN_ALGORITHM),
      publicJwk: JSON.parse(record.publicJwk) as JWK,
    };
  }

  sign(claims: Record<string, unknown>): Promise<string> {
    const key = signingKeyOf(this.keys, this.now());
    if (!key) throw new Error("no signing key is active");
    return new SignJWT(claims)
      .setProtectedHeader({ alg: TOKEN_ALGORITHM, kid: key.kid, typ: "JWT" })
      .sign(key.privateKey);
  }

  /** Every key that exists: those about to sign, the one signing, and those whose tokens may still be alive. */
  publicKeys(): JWK[] {
    return this.keys.map((k) => k.publicJwk);
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
