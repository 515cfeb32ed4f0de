// Revoked sessions, as every verifier knows them: identity announces each revocation on its
// WatchRevocations stream, and every process that verifies tokens follows it — from the start again
// after a reconnect, so nothing announced while it was away is missed. A revoked token is refused
// (TokenVerifier), and a live stream opened with it ends (the server adapter).
//
// While the stream cannot be followed (identity away, or unreachable from here), the process serves
// on with the revocations it knows: a revocation committed then reaches it once it follows again
// (the stream starts with every live revocation), and until then the token it revokes is honoured
// here at most until it expires (TOKEN_TTL_SECONDS, 15 min by default) — no token outlives that. The
// gauge switchyard_revocations_followed and the alert SwitchyardRevocationsNotFollowed say so.
import type { Client as GrpcChannelClient } from "@grpc/grpc-js";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { IdentityService } from "@switchyard/gen/switchyard/identity/v1/identity_pb.js";
import { createServiceClient } from "./grpc/client.js";
import type { Logger } from "./logger.js";
import { reportRevocationsFollowed } from "./metrics.js";

export class RevocationList {
  /** Session id → when its token expires (ms): after that it is refused anyway and is forgotten here. */
  private readonly revoked = new Map<string, number>();
  private readonly waiting = new Map<string, Set<() => void>>();
  private lastPrune = 0;

  constructor(private readonly now: () => number = Date.now) {}

  /** Records a revocation and tells whoever waits on that session (its live streams). */
  revoke(sessionId: string, expiresAtMs: number): void {
    if (expiresAtMs <= this.now()) return;
    this.revoked.set(sessionId, expiresAtMs);
    const listeners = this.waiting.get(sessionId);
    this.waiting.delete(sessionId);
    for (const listener of listeners ?? []) listener();
    this.prune();
  }

  isRevoked(sessionId: string): boolean {
    const until = this.revoked.get(sessionId);
    if (until === undefined) return false;
    if (until > this.now()) return true;
    this.revoked.delete(sessionId);
    return false;
  }

  /** Calls `listener` once when the session is revoked (at once if it is); returns the way to stop waiting. */
  onRevoked(sessionId: string, listener: () => void): () => void {
    if (this.isRevoked(sessionId)) {
      listener();
      return () => {};
    }
    const set = this.waiting.get(sessionId) ?? new Set();
    set.add(listener);
    this.waiting.set(sessionId, set);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.waiting.get(sessionId) === set) this.waiting.delete(sessionId);
    };
  }

  get size(): number {
    return this.revoked.size;
  }

  /** Forgets revocations of tokens that have expired (at most once a minute). */
  private prune(): void {
    const now = this.now();
    if (now - this.lastPrune < 60_000) return;
    this.lastPrune = now;
    for (const [id, until] of this.revoked) if (until <= now) this.revoked.delete(id);
  }
}

export interface RevocationFollower {
  /** Resolves once the revocations that stood at the first connection are all known (or after `waitMs`). */
  synced(waitMs: number): Promise<boolean>;
  stop(): void;
}

const RECONNECT_MIN_MS = 100;
/** At most this long between tries: a revocation made while identity was away applies within it of its return. */
const RECONNECT_MAX_MS = 1_000;

/** Follows identity's WatchRevocations into `list`, reconnecting (with backoff) whenever the stream ends. */
export function followRevocations(
  channel: GrpcChannelClient,
  list: RevocationList,
  logger: Logger,
): RevocationFollower {
  const identity = createServiceClient(IdentityService, channel);
  const controller = new AbortController();
  let markSynced: () => void = () => {};
  let following = false;
  const unreport = reportRevocationsFollowed(() => following);
  const firstSync = new Promise<void>((resolve) => (markSynced = resolve));
  void (async () => {
    let backoff = RECONNECT_MIN_MS;
    let failures = 0;
    while (!controller.signal.aborted) {
      try {
        for await (const message of identity.watchRevocations({}, { signal: controller.signal })) {
          if (message.revocation) {
            const { sessionId, expireTime } = message.revocation;
            list.revoke(sessionId, expireTime ? timestampDate(expireTime).getTime() : Date.now() + 24 * 3_600_000);
          }
          if (message.synced) {
            following = true;
            markSynced();
            backoff = RECONNECT_MIN_MS;
            if (failures > 0) logger.info({ after: failures }, "following token revocations again");
            failures = 0;
          }
        }
      } catch (err) {
        if (controller.signal.aborted) return;
        // A stream that ends is routine when it opens again at once: identity's server ends every
        // connection at its age (GRPC_MAX_CONNECTION_AGE_MS), and a rolling restart moves it to
        // another replica. One that cannot be opened again is worth a warning, once per run of failures.
        failures++;
        if (failures === 1) logger.info({ message: String(err) }, "identity's revocation stream ended; reconnecting");
        if (failures === 2) logger.warn({ message: String(err) }, "lost identity's revocation stream; reconnecting");
      }
      following = false;
      await new Promise((resolve) => setTimeout(resolve, backoff).unref());
      backoff = Math.min(RECONNECT_MAX_MS, backoff * 2);
    }
  })();
  return {
    async synced(waitMs) {
      let timer: NodeJS.Timeout | undefined;
      // Not unref'd: a process waiting here at start has nothing else keeping it alive yet.
      const timedOut = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), waitMs)));
      const done = await Promise.race([firstSync.then(() => true), timedOut]);
      clearTimeout(timer);
      return done;
    },
    stop: () => {
      controller.abort();
      unreport();
    },
  };
}
