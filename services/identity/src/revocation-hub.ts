// The revocations of this identity replica's watchers: one LISTEN on the store's channel (so a
// revocation committed on any replica arrives), fanned out in process to the WatchRevocations
// streams and to identity's own revocation list.
import { EventEmitter } from "node:events";
import type { Logger } from "@switchyard/platform/logger.js";
import { RevocationList } from "@switchyard/platform/revocations.js";
import { untilDone } from "@switchyard/platform/until-done.js";
import type { IdentityStore, RevocationRecord } from "./store/port.js";

export class RevocationHub {
  private readonly emitter = new EventEmitter();
  private stopListening: (() => Promise<void>) | undefined;
  private stopped = false;
  /** Identity's own list: its verifier refuses revoked tokens like every other one. */
  readonly list = new RevocationList();

  constructor(
    private readonly store: IdentityStore,
    private readonly logger: Logger,
  ) {
    this.emitter.setMaxListeners(0);
  }

  async start(): Promise<void> {
    this.stopListening = await this.store.watchRevocations(
      (r) => this.announce(r),
      () =>
        void untilDone(() => this.reload(), {
          logger: this.logger,
          what: "read the revocations again",
          stopped: () => this.stopped,
        }),
    );
    // After listening starts, so that a revocation committed meanwhile is in one or the other.
    for (const r of await this.store.liveRevocations()) this.list.revoke(r.sessionId, r.expiresAt.getTime());
    this.logger.debug({ revoked: this.list.size }, "revocations loaded");
  }

  private announce(r: RevocationRecord): void {
    this.list.revoke(r.sessionId, r.expiresAt.getTime());
    this.emitter.emit("revoked", r);
  }

  /**
   * The store's connection was lost, and with it any revocation announced meanwhile: every live one
   * is read and announced again (a watcher told twice of one changes nothing).
   */
  private async reload(): Promise<void> {
    const live = await this.store.liveRevocations();
    for (const r of live) this.announce(r);
    this.logger.info({ revoked: live.length }, "revocations read again after the store's connection came back");
  }

  /** Returns the unsubscribe function. */
  subscribe(listener: (revocation: RevocationRecord) => void): () => void {
    this.emitter.on("revoked", listener);
    return () => this.emitter.off("revoked", listener);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.stopListening?.();
  }
}
