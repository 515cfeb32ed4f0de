// One upstream live stream per key (the posts feed of a tenant) shared by every subscriber of that
// key on this gateway, instead of one gRPC stream, one serialization and one framing per subscriber:
// each event arrives once and is framed once (sse.ts caches the frame on the event) for all of them.
//
// Who may subscribe is still the upstream's decision: each subscriber first opens a stream of its own
// with its own token, which the service authorizes and replays from the subscriber's position; once
// that says it has caught up, the subscriber's own stream is closed and it follows the shared tail.
// The shared stream is opened with the token of one subscriber (the one that stays good longest);
// when the service ends it for that token (expired, logged out), it is reopened after the last
// event with another subscriber's, so nothing is missed. Each subscriber's own token lifetime is
// enforced at the edge (pipeline/answer.ts ends every live stream when its caller's token ends).
//
// When the upstream drops a stream — the shared one or a subscriber's own — for a routine reason (its
// connection reached its age, a replica restarted: live-reopen.ts), it is opened again after the last
// event delivered, and the subscribers see nothing but the events; only an outage past the bound ends
// their feeds (in-band: they reconnect with their last event id).
import { fail } from "@switchyard/platform/errors.js";
import type { Logger } from "@switchyard/platform/logger.js";
import { gatewayLiveResubscriptions } from "@switchyard/platform/metrics.js";
import { ConnectError, Code } from "@connectrpc/connect";
import { isRoutineDrop, Reopening, type ReopenPolicy } from "./live-reopen.js";
import type { ServerSentEvent } from "./sse.js";

/** An event of a shared stream: its id is its position (a reconnect resumes after it). */
export interface LiveEvent extends ServerSentEvent {
  id: string;
}

/** The credential a subscriber follows with: its call headers and when its token expires (seconds since the epoch). */
export interface LiveCredential {
  headers: Record<string, string>;
  expiresAt: number;
}

/** An upstream stream, confirmed: its events as they come. */
export interface LiveUpstream extends AsyncIterable<LiveEvent> {
  /** The position it starts after, when the opener found one for "" (the newest event then): a reopening resumes there. */
  readonly after?: string;
}

/**
 * Opens the shared upstream stream after `position` ("" = only new events) with one subscriber's
 * headers. Resolves once the upstream confirmed the subscription; the iterable then yields the events.
 */
export type OpenShared = (
  position: string,
  headers: Record<string, string>,
  signal: AbortSignal,
) => Promise<LiveUpstream>;

/** Opens a subscriber's own stream after `position`; resolves once confirmed; it ends once caught up. */
export type OpenOwn = (position: string, signal: AbortSignal) => Promise<AsyncIterable<LiveEvent>>;

/** Which upstream stream was reopened: a tenant's shared tail, or a subscriber's own catch-up. */
export type LiveStreamKind = "shared" | "catch_up";

/** What a subscriber may hold (its frames' bytes) while it catches up before it is ended as too slow; it reconnects and resumes. */
const MAX_HELD_BYTES = 1024 * 1024;

const sizeOf = (event: LiveEvent) => event.frame?.byteLength ?? 256;
const tooSlow = () =>
  fail("STREAM_READER_TOO_SLOW", "the live feed fell too far behind and was ended; reconnect to resume");

/** Writes one event to a subscriber's client at once; false when the subscriber is done (gone, or too far behind). */
export type LiveWriter = (event: LiveEvent) => boolean;

/** Whether an event of the shared stream is after what the subscriber's own stream already sent it. */
export type IsNew = (event: LiveEvent) => boolean;

class Subscriber {
  /** Events of the shared stream that arrived while the subscriber caught up on its own stream. */
  private held: LiveEvent[] | undefined = [];
  private heldBytes = 0;
  private writer: LiveWriter | undefined;
  /** Until the shared stream passes what the subscriber's own stream sent (it may lag while it reopens): which events to skip. */
  private skipUntil: IsNew | undefined;
  private settle: { resolve(): void; reject(err: unknown): void } | undefined;
  private failure: unknown;
  private done = false;

  constructor(
    readonly credential: LiveCredential,
    /** The shared stream's position when the subscriber joined ("" before its first event): its tail starts after it. */
    public since: string,
  ) {}

  /** An event of the shared stream: written at once (synchronously: no queue, no promise per subscriber) or held. */
  deliver(event: LiveEvent): void {
    if (this.writer) {
      if (this.skipUntil) {
        if (!this.skipUntil(event)) return;
        this.skipUntil = undefined;
      }
      if (!this.writer(event)) this.finish();
      return;
    }
    if (!this.held) return;
    this.held.push(event);
    this.heldBytes += sizeOf(event);
    if (this.heldBytes > MAX_HELD_BYTES) this.fail(tooSlow());
  }

  follow(isNew: IsNew, writer: LiveWriter): Promise<void> {
    // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- passes on what fail() was given, as thrown upstream
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.done) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.settle = { resolve, reject };
      const held = this.held ?? [];
      this.held = undefined;
      // The shared stream is in order: once one event is new, every later one is.
      let skipping = true;
      for (const event of held) {
        if (skipping && !isNew(event)) continue;
        skipping = false;
        if (!writer(event)) return this.finish();
      }
      this.skipUntil = skipping ? isNew : undefined;
      this.writer = writer;
    });
  }

  /** Ends the subscription normally (it left, or its client is gone). */
  finish(): void {
    if (this.done) return;
    this.done = true;
    this.writer = undefined;
    this.held = undefined;
    this.settle?.resolve();
  }

  /** Ends it with the error (the shared stream failed, or the subscriber fell too far behind). */
  fail(err: unknown): void {
    if (this.done) return;
    this.done = true;
    this.failure = err;
    this.writer = undefined;
    this.held = undefined;
    this.settle?.reject(err);
  }
}

class SharedStream {
  readonly subscribers = new Set<Subscriber>();
  readonly controller = new AbortController();
  /** After the last event delivered: where a reopened upstream resumes. */
  position = "";
  /** Settles once the upstream confirmed the first subscription (or could not). */
  readonly subscribed: Promise<void>;
  private confirm!: () => void;
  private refuse!: (err: unknown) => void;
  confirmed = false;

  constructor() {
    this.subscribed = new Promise<void>((resolve, reject) => {
      this.confirm = resolve;
      this.refuse = reject;
    });
    this.subscribed.catch(() => undefined); // a refusal reaches whoever joined; no one else needs it
  }

  /** The first open was confirmed, after `position`: where the tail of everyone who joined meanwhile starts. */
  confirmSubscribed(position: string): void {
    this.position = position;
    for (const s of this.subscribers) s.since = position;
    this.confirmed = true;
    this.confirm();
  }

  /** Ends every subscriber with the error, or each with its own (they reconnect with their last event id). */
  end(err: unknown, errorOf: (subscriber: Subscriber) => unknown = () => err): void {
    if (!this.confirmed) this.refuse(err);
    for (const s of this.subscribers) s.fail(errorOf(s));
    this.subscribers.clear();
  }
}

export interface LiveSubscription {
  /** The position the subscriber's shared tail starts after ("" when the feed had none): where it resumes if nothing else was sent. */
  readonly after: string;
  /**
   * The subscriber's own stream has sent everything up to now: from now on every event of the shared
   * stream goes to `writer` as it arrives — first those held meanwhile — skipping those up to the
   * first that `isNew` says its own stream did not send. Resolves when the subscription ends (leave,
   * or the writer said it is done); rejects with the error that ended the shared stream, or with
   * STREAM_READER_TOO_SLOW.
   */
  follow(isNew: IsNew, writer: LiveWriter): Promise<void>;
  leave(): void;
}

export class LiveFanout {
  private readonly streams = new Map<string, SharedStream>();

  constructor(
    private readonly logger: Logger,
    private readonly policy: ReopenPolicy,
  ) {}

  /** Shared upstream streams open now. */
  get size(): number {
    return this.streams.size;
  }

  /**
   * Joins the shared stream of `key` (opening it with `open` if this is its first subscriber) and
   * resolves once that stream is subscribed upstream: from then on, every event reaches this
   * subscriber — held until it follows, so its own catch-up can run in between without a gap.
   */
  async join(key: string, credential: LiveCredential, open: OpenShared): Promise<LiveSubscription> {
    let stream = this.streams.get(key);
    const subscriber = new Subscriber(credential, stream?.position ?? "");
    if (!stream) {
      stream = new SharedStream();
      this.streams.set(key, stream);
      stream.subscribers.add(subscriber);
      void this.run(key, stream, open);
    } else stream.subscribers.add(subscriber);
    let left = false;
    const leave = () => {
      if (left) return;
      left = true;
      subscriber.finish();
      stream.subscribers.delete(subscriber);
      if (stream.subscribers.size === 0 && this.streams.get(key) === stream) {
        this.streams.delete(key);
        stream.controller.abort();
      }
    };
    try {
      await stream.subscribed;
    } catch (err) {
      leave();
      throw err;
    }
    return {
      get after() {
        return subscriber.since;
      },
      follow: (isNew, writer) => subscriber.follow(isNew, writer),
      leave,
    };
  }

  /**
   * A subscriber's own stream, `first` (opened after `position`), as one that outlives routine drops:
   * when it drops it is opened again with `open` after the last event it yielded, within the bound.
   * It ends when the upstream ends it (caught up); `signal` is the subscriber's (it went away).
   */
  async *resumable(
    first: AsyncIterable<LiveEvent>,
    open: OpenOwn,
    position: string,
    signal: AbortSignal,
  ): AsyncIterable<LiveEvent> {
    const reopening = new Reopening(this.policy, signal);
    let events: AsyncIterable<LiveEvent> | undefined = first;
    try {
      for (;;) {
        try {
          if (!events) {
            const attempt = reopening.attempt();
            events = await open(position, attempt.signal);
            attempt.opened();
            this.reopened(reopening, "catch_up");
          }
          for await (const event of events) {
            position = event.id;
            yield event;
          }
          return;
        } catch (err) {
          if (signal.aborted) throw err;
          events = undefined;
          await this.reopen(reopening, err, "catch_up");
          if (signal.aborted) throw err;
        }
      }
    } finally {
      reopening.close();
    }
  }

  /**
   * Ends every shared stream, and so every subscriber's feed, with `err` (said in-band; the clients
   * reconnect after their last event): a gateway that stops does not wait out its live feeds.
   */
  endAll(err: unknown): void {
    for (const [key, stream] of this.streams) this.close(key, stream, err);
  }

  private async run(key: string, stream: SharedStream, open: OpenShared): Promise<void> {
    const { signal } = stream.controller;
    /** The tokens the upstream refused (by authorization header), with what it said. */
    const refused = new Map<string, unknown>();
    const reopening = new Reopening(this.policy, signal);
    try {
      for (;;) {
        const credential = this.credentialFor(stream, refused);
        if (!credential) {
          // A subscriber whose own token the upstream refused (revoked) is told what it said, one whose
          // token ran out that it expired — the upstream may end the stream a moment before the edge's
          // own watch of that token does —; the others, that nobody's token is good.
          const now = Date.now() / 1000;
          const expired = fail("UNAUTHENTICATED", "the token has expired");
          const noneGood = fail("UNAUTHENTICATED", "no subscriber of the live feed holds a token that is still good");
          this.close(
            key,
            stream,
            noneGood,
            (s) =>
              refused.get(s.credential.headers.authorization ?? "") ??
              (s.credential.expiresAt <= now ? expired : noneGood),
          );
          return;
        }
        const attempt = reopening.attempt();
        try {
          const events = await open(stream.position, credential.headers, attempt.signal);
          attempt.opened();
          if (!stream.confirmed) stream.confirmSubscribed(events.after ?? stream.position);
          else if (reopening.down) this.reopened(reopening, "shared", key);
          for await (const event of events) {
            stream.position = event.id;
            for (const subscriber of stream.subscribers) subscriber.deliver(event);
          }
          // The upstream ended the stream without an error (a service shutting down): a drop like any other.
          throw fail("UPSTREAM_UNAVAILABLE", "the live feed's upstream ended the stream");
        } catch (err) {
          if (signal.aborted) return; // the last subscriber left
          if (ConnectError.from(err).code === Code.Unauthenticated) {
            // That subscriber's token is no longer good upstream: go on with another's, after the last event.
            refused.set(credential.headers.authorization ?? "", err);
            continue;
          }
          try {
            // Only a stream that was up is reopened: a first open that fails is its first subscriber's answer.
            if (!stream.confirmed) throw err;
            await this.reopen(reopening, err, "shared", key);
            if (signal.aborted) return;
            continue;
          } catch {
            this.logger.warn(
              { key, message: err instanceof Error ? err.message : String(err) },
              reopening.down
                ? "a shared live stream could not be reopened within GATEWAY_SSE_UPSTREAM_OUTAGE_MS; its subscribers reconnect"
                : "a shared live stream ended; its subscribers reconnect",
            );
            this.close(key, stream, err);
            return;
          }
        }
      }
    } finally {
      reopening.close();
    }
  }

  /** A stream dropped with `err`: waits for the next attempt (throws `err` when there is none: no routine drop, or past the bound). */
  private async reopen(reopening: Reopening, err: unknown, kind: LiveStreamKind, key?: string): Promise<void> {
    if (!reopening.down && isRoutineDrop(err))
      this.logger.debug(
        { stream: kind, key, message: err instanceof Error ? err.message : String(err) },
        "an upstream live stream dropped; reopening it after its last event",
      );
    await reopening.after(err);
  }

  /** Counts a reopened stream; one that took more than an attempt (an outage, not a rotation) is worth an info line. */
  private reopened(reopening: Reopening, kind: LiveStreamKind, key?: string): void {
    const attempts = reopening.reopened();
    gatewayLiveResubscriptions.labels({ stream: kind }).inc();
    if (attempts > 1) this.logger.info({ stream: kind, key, attempts }, "an upstream live stream is open again");
    else this.logger.debug({ stream: kind, key }, "an upstream live stream is open again");
  }

  private close(key: string, stream: SharedStream, err: unknown, errorOf?: (subscriber: Subscriber) => unknown): void {
    if (this.streams.get(key) === stream) this.streams.delete(key);
    stream.controller.abort();
    stream.end(err, errorOf);
  }

  /** The credential of the subscriber whose token stays good longest, among those not refused. */
  private credentialFor(stream: SharedStream, refused: ReadonlyMap<string, unknown>): LiveCredential | undefined {
    const now = Date.now() / 1000;
    let best: LiveCredential | undefined;
    for (const { credential } of stream.subscribers) {
      if (credential.expiresAt <= now || refused.has(credential.headers.authorization ?? "")) continue;
      if (!best || credential.expiresAt > best.expiresAt) best = credential;
    }
    return best;
  }
}
