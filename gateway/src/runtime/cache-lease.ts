// The rule that lets the edge cache answer from memory: only while its lease from content runs, and
// only once it has applied every change content had committed when it granted the lease.
//
// The lease is measured on this process's clock from when the renewal was SENT: content counts the same
// length from when it received it, later, so this end always comes first. Content holds every write
// until each cache with a running lease has applied it (or the lease ended), and a lease granted after a
// write names that write as required: so once a write has answered, no cache answers from before it.
// Pure: the clock is given.

/** What one renewal was: for which subscription, sent when. */
export interface RenewalTicket {
  readonly subscription: number;
  readonly sentAt: number;
}

export class CacheLease {
  /** Bumped on every new subscription: a renewal made for an earlier one grants nothing. */
  private subscription = 0;
  private live = false;
  private appliedPosition = -1n;
  private requiredPosition = 0n;
  private leaseEnd = Number.NEGATIVE_INFINITY;
  private held = false;

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** A new subscription starts after `position`, its cache empty: not serving until a renewal is granted. */
  subscribed(position: bigint): void {
    this.subscription++;
    this.live = true;
    this.held = false;
    this.leaseEnd = Number.NEGATIVE_INFINITY;
    this.appliedPosition = position;
  }

  /** The subscription is gone (the stream broke, the lease ended): nothing is served from memory. */
  lost(): void {
    this.subscription++;
    this.live = false;
    this.held = false;
    this.leaseEnd = Number.NEGATIVE_INFINITY;
  }

  /** Every change up to `position` has been applied to the cache. */
  applied(position: bigint): void {
    if (position > this.appliedPosition) this.appliedPosition = position;
  }

  /** The current subscription's number (renewal tickets name theirs). */
  get subscriptionNumber(): number {
    return this.subscription;
  }

  /** Every change up to here has been applied. */
  get position(): bigint {
    return this.appliedPosition;
  }

  /** Take this just before sending a renewal; undefined when there is no subscription to renew. */
  renewalSent(): RenewalTicket | undefined {
    return this.live ? { subscription: this.subscription, sentAt: this.now() } : undefined;
  }

  /** Content granted the renewal `ticket` was taken for: `leaseMs` from its sending, once `required` is applied. */
  granted(ticket: RenewalTicket, leaseMs: number, required: bigint): void {
    if (!this.live || ticket.subscription !== this.subscription) return;
    const end = ticket.sentAt + leaseMs;
    if (end > this.leaseEnd) this.leaseEnd = end;
    if (required > this.requiredPosition) this.requiredPosition = required;
    this.held = true;
  }

  /** Whether memory may answer now. */
  serves(): boolean {
    return this.live && this.now() < this.leaseEnd && this.appliedPosition >= this.requiredPosition;
  }

  /** A lease was held and has run out: the cache must start again from a fresh snapshot. */
  expired(): boolean {
    return this.live && this.held && this.now() >= this.leaseEnd;
  }
}
