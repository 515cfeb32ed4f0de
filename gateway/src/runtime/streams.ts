// Live streams at the edge. One function says whether a request asks for one — the router's route
// and the limiter's count both ask it, so no Accept header reads one way to one and another way to
// the other — and each caller may hold only so many at once.

/**
 * Whether the request asks for a live stream: its operation offers text/event-stream and its Accept
 * header names that media type (with q above 0). A JSON request whose Accept merely mentions the
 * words elsewhere (a parameter, another type) is no stream.
 */
export function wantsEventStream(
  operation: { offersEventStream: boolean },
  accept: string | string[] | undefined,
): boolean {
  if (!operation.offersEventStream || accept === undefined) return false;
  for (const range of (Array.isArray(accept) ? accept.join(",") : accept).split(",")) {
    const [type = "", ...params] = range.split(";").map((p) => p.trim());
    if (type.toLowerCase() !== "text/event-stream") continue;
    const q = params.map((p) => /^q=([0-9.]+)$/i.exec(p)?.[1]).find((v) => v !== undefined);
    if (q === undefined || Number(q) > 0) return true;
  }
  return false;
}

/** Open live streams per caller, at most `max` each (per gateway process). */
export class StreamSlots {
  private readonly open = new Map<string, number>();

  constructor(private readonly max: number) {}

  /** A slot for the caller, with the function that gives it back; undefined when all of theirs are taken. */
  take(caller: string): (() => void) | undefined {
    const count = this.open.get(caller) ?? 0;
    if (count >= this.max) return undefined;
    this.open.set(caller, count + 1);
    let returned = false;
    return () => {
      if (returned) return;
      returned = true;
      const left = (this.open.get(caller) ?? 1) - 1;
      if (left <= 0) this.open.delete(caller);
      else this.open.set(caller, left);
    };
  }

  /** Streams open now, all callers together. */
  get size(): number {
    let n = 0;
    for (const count of this.open.values()) n += count;
    return n;
  }
}
