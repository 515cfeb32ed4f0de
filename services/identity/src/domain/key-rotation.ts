// When signing keys come and go, without I/O. A key is published (in the JWKS) from the moment it
// exists and starts signing only `publishLeadMs` later, so every verifier has it before it meets a
// token signed with it. It signs for `rotationMs`, then the next one takes over; it stays published
// until the last token it signed has expired, and is then forgotten.

export interface KeyTimes {
  kid: string;
  activatesAt: number;
}

export interface RotationSettings {
  rotationMs: number;
  publishLeadMs: number;
  /** The longest a token lives: how long a retired key must still verify. */
  tokenTtlMs: number;
}

export interface RotationPlan {
  /** A new key to make, and when it starts signing. */
  addActivatingAt?: number;
  /** Keys no token it signed can still be valid for. */
  remove: string[];
}

/** The key that signs now: the latest whose time has come. */
export function signingKeyOf<K extends KeyTimes>(keys: readonly K[], now: number): K | undefined {
  return [...keys].filter((k) => k.activatesAt <= now).sort((a, b) => b.activatesAt - a.activatesAt)[0];
}

export function planRotation(keys: readonly KeyTimes[], now: number, settings: RotationSettings): RotationPlan {
  const byActivation = [...keys].sort((a, b) => a.activatesAt - b.activatesAt);
  const signing = signingKeyOf(byActivation, now);
  const pending = byActivation.some((k) => k.activatesAt > now);
  // A key retires when the next one starts signing; its tokens live tokenTtlMs more.
  const remove = byActivation
    .filter((k, i) => {
      const next = byActivation[i + 1];
      return next !== undefined && next.activatesAt <= now && next.activatesAt + settings.tokenTtlMs <= now;
    })
    .map((k) => k.kid);
  if (!signing && !pending) return { addActivatingAt: now, remove };
  if (!pending && signing && signing.activatesAt + settings.rotationMs - settings.publishLeadMs <= now) {
    return {
      addActivatingAt: Math.max(signing.activatesAt + settings.rotationMs, now + settings.publishLeadMs),
      remove,
    };
  }
  return { remove };
}
