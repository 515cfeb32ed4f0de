// An upstream live stream that drops is opened again after the last event delivered, so its SSE
// subscribers see nothing of it. Drops are routine: a service ends every client connection at its age
// (GRPC_MAX_CONNECTION_AGE_MS, 5 min), a replica that stops ends its streams, a rollout replaces them
// all. This is one outage's reckoning: a back-off between attempts, and the bound (the gateway's
// GATEWAY_SSE_UPSTREAM_OUTAGE_MS) past which the feeds end after all — in-band, their clients
// reconnecting with their last event id.
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { fail } from "@switchyard/platform/errors.js";

export interface ReopenPolicy {
  /** How long an upstream live stream may stay dropped (not yet confirmed again) before the feeds it serves end. */
  outageMs: number;
}

/** The first attempt goes at once (a connection at its age: another one answers); then 100 ms, doubling, up to 2 s. */
const FIRST_DELAY_MS = 100;
const MAX_DELAY_MS = 2_000;
/** A stream that dropped sooner than this after it was reopened does not start the back-off afresh (no tight loop on an upstream that accepts and drops). */
const STEADY_MS = 1_000;

/**
 * A drop worth riding out: UNAVAILABLE — the connection went (GOAWAY at its age, "Connection dropped"),
 * the server is shutting down, no replica answers for a moment, or the stream ended without a word.
 * Anything else (a token refused, a replay too long, a permission) is the upstream's answer, not a drop.
 */
export function isRoutineDrop(err: unknown): boolean {
  return ConnectError.from(err).code === Code.Unavailable;
}

/** One attempt at (re)opening: its signal, and how it ends. */
export interface ReopenAttempt {
  /** For the upstream call: aborted with the stream's own signal, or when the bound passes before `opened`. */
  readonly signal: AbortSignal;
  /** The upstream confirmed the stream: the bound no longer applies to it. */
  opened(): void;
}

/** The drops of one upstream stream, across its reopenings: when to try again, and when to stop. */
export class Reopening {
  /** When the current outage began (Date.now()); undefined while the stream is up. */
  private since: number | undefined;
  /** Attempts in this outage. */
  private attempts = 0;
  /** Attempts since the stream last stayed up for STEADY_MS: what the delay grows with. */
  private backoff = 0;
  /** When the stream was last (re)opened. */
  private upSince = 0;
  private release: (() => void) | undefined;

  constructor(
    private readonly policy: ReopenPolicy,
    /** The stream's own signal: its subscribers left, nothing to reopen for. */
    private readonly signal: AbortSignal,
  ) {}

  /** Whether the stream is down now (dropped, not yet confirmed again). */
  get down(): boolean {
    return this.since !== undefined;
  }

  /**
   * The stream dropped with `err`: resolves when to try again (at once the first time, then after a
   * growing, jittered delay), or as soon as the stream's signal is aborted. Throws `err` when it is no
   * routine drop, or when the upstream has stayed unreachable past the bound.
   */
  async after(err: unknown): Promise<void> {
    if (!isRoutineDrop(err)) throw err;
    const now = Date.now();
    if (this.since === undefined) {
      this.since = now;
      if (now - this.upSince >= STEADY_MS) this.backoff = 0;
    }
    const left = this.since + this.policy.outageMs - now;
    if (left <= 0) throw err;
    this.attempts++;
    const attempt = this.backoff++;
    if (attempt === 0) return;
    const delay = Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** Math.min(attempt - 1, 5));
    // Jittered (a half to the whole of it), so the gateways a rollout cut at once do not come back at once.
    await sleep(Math.min(left, delay / 2 + (Math.random() * delay) / 2), undefined, { signal: this.signal }).catch(
      () => undefined,
    );
  }

  /** The signal of the next attempt. While the stream is down, an attempt that hangs past the bound is abandoned. */
  attempt(): ReopenAttempt {
    this.release?.();
    this.release = undefined;
    if (this.since === undefined) return { signal: this.signal, opened: () => {} };
    const controller = new AbortController();
    const stop = () => controller.abort(this.signal.reason);
    this.signal.addEventListener("abort", stop, { once: true });
    const timer = setTimeout(
      () => controller.abort(fail("UPSTREAM_UNAVAILABLE", "the live feed's upstream did not answer in time")),
      Math.max(0, this.since + this.policy.outageMs - Date.now()),
    );
    timer.unref();
    this.release = () => {
      clearTimeout(timer);
      this.signal.removeEventListener("abort", stop);
    };
    return { signal: controller.signal, opened: () => clearTimeout(timer) };
  }

  /** The reopened stream was confirmed: the outage is over. Returns how many attempts it took. */
  reopened(): number {
    const attempts = this.attempts;
    this.since = undefined;
    this.attempts = 0;
    this.upSince = Date.now();
    return attempts;
  }

  /** The stream is done for good: nothing of it stays behind (a listener, a timer). */
  close(): void {
    this.release?.();
    this.release = undefined;
  }
}
