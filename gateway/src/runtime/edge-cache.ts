// The edge cache's memory: answers already serialized (status, the route's own headers, the JSON
// body's bytes), bounded in entries and bytes, least recently used out first. It holds catalog pages
// (one group: any catalog change drops them all) and documents' representations (a group per tenant
// and document). Whether it may answer at all is the lease's word (cache-lease.ts), asked on every
// lookup; the follower (cache-follower.ts) drops what content's change stream names.
//
// A fill races the changes: a miss reads upstream, and the change that makes that read old may be
// applied while the read is on its way. A fill therefore takes a ticket before it reads, and is kept
// only when nothing of its group changed (and nothing was cleared) since.

/** An answer as the route gave it, serialized once. */
export interface CachedAnswer {
  readonly status: number;
  /** The route's own headers (ETag, Cache-Control); the pipeline adds the rest per request. */
  readonly headers: Readonly<Record<string, string>>;
  /** The JSON body, serialized. */
  readonly body: Buffer;
  /** The entity tag, for If-None-Match. */
  readonly etag?: string;
}

export interface FillTicket {
  readonly group: string;
  readonly epoch: number;
  /** Drops made before it was taken. */
  readonly drops: number;
}

export interface EdgeCacheLimits {
  maxEntries: number;
  maxBytes: number;
}

/** The catalog's pages are one group: any catalog change drops every page. */
export const CATALOG_GROUP = "catalog";
export const documentGroup = (tenantId: string, documentId: string): string =>
  `doc\u0000${tenantId}\u0000${documentId}`;

interface Entry {
  answer: CachedAnswer;
  group: string;
  bytes: number;
}

const MAX_REMEMBERED_DROPS = 10_000;

/** What an entry costs besides its body: its key, headers and bookkeeping (an estimate, never below it). */
const ENTRY_OVERHEAD_BYTES = 256;

export class EdgeCache {
  /** In use order: Map iteration is insertion order, and a hit re-inserts its entry (least recently used first). */
  private readonly entries = new Map<string, Entry>();
  private readonly groups = new Map<string, Set<string>>();
  /** Drops so far, and the count at each group's last drop (the most recent ones; older ones are below `forgotten`). */
  private drops = 0;
  private readonly lastDrop = new Map<string, number>();
  private forgotten = 0;
  /** Bumped by clear(): every ticket taken before is void. */
  private epoch = 0;
  private bytes = 0;

  constructor(
    private readonly limits: EdgeCacheLimits,
    /** Whether memory may answer now (the lease); asked on every lookup. */
    private readonly serving: () => boolean,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  get byteSize(): number {
    return this.bytes;
  }

  /** Whether a lookup can answer from memory now (a request that cannot is a "bypass"). */
  get active(): boolean {
    return this.serving();
  }

  /** The answer kept under `key`, when memory may answer now. */
  lookup(key: string): CachedAnswer | undefined {
    if (!this.serving()) return undefined;
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    // Most recently used now.
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.answer;
  }

  /** Taken before the upstream read that may fill `group`. */
  ticket(group: string): FillTicket {
    return { group, epoch: this.epoch, drops: this.drops };
  }

  /** Keeps `answer` under `key`, unless its group changed or the cache was cleared since `ticket`. */
  fill(ticket: FillTicket, key: string, answer: CachedAnswer): boolean {
    // A group whose last drop was forgotten was dropped no later than `forgotten`: a ticket older than that cannot tell.
    if (ticket.epoch !== this.epoch || (this.lastDrop.get(ticket.group) ?? this.forgotten) > ticket.drops) return false;
    const bytes = answer.body.length + ENTRY_OVERHEAD_BYTES;
    if (bytes > this.limits.maxBytes) return false;
    this.remove(key);
    this.entries.set(key, { answer, group: ticket.group, bytes });
    this.bytes += bytes;
    let members = this.groups.get(ticket.group);
    if (!members) this.groups.set(ticket.group, (members = new Set()));
    members.add(key);
    while (this.entries.size > this.limits.maxEntries || this.bytes > this.limits.maxBytes) {
      const oldest = this.entries.keys().next().value as string;
      this.remove(oldest);
    }
    return true;
  }

  /** Drops every entry of `group`, and voids the tickets of fills of it under way. */
  drop(group: string): void {
    this.drops++;
    this.lastDrop.delete(group);
    this.lastDrop.set(group, this.drops);
    // Remembered for the most recent drops only: a fill is a few ms, not thousands of drops, long.
    if (this.lastDrop.size > MAX_REMEMBERED_DROPS) {
      const [oldest, at] = this.lastDrop.entries().next().value as [string, number];
      this.lastDrop.delete(oldest);
      this.forgotten = at;
    }
    const members = this.groups.get(group);
    if (members) for (const key of [...members]) this.remove(key);
  }

  /** Drops everything, and voids every ticket taken before. */
  clear(): void {
    this.epoch++;
    this.entries.clear();
    this.groups.clear();
    this.lastDrop.clear();
    this.forgotten = this.drops;
    this.bytes = 0;
  }

  private remove(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.bytes -= entry.bytes;
    const members = this.groups.get(entry.group);
    members?.delete(key);
    if (members?.size === 0) this.groups.delete(entry.group);
  }
}
