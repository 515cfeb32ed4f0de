// The fuzz run's own credentials, renewed before they expire. An access token lives
// TOKEN_TTL_SECONDS (15 minutes by default) and a long run lasts longer, so each holder logs in again
// once less than a third of its token's life is left. The requests are generated — and their answers
// predicted (oracle.ts) — with the first tokens, which stand for their holders throughout; each request
// goes on the wire with its holder's current token in their place. A renewed token has the length of
// the first (its claims have fixed widths; checked), so nothing about the request changes but the token.
import { expect } from "chai";
import { jwtPayload, type Api } from "../support/http.js";
import type { Holder } from "./oracle.js";
import type { RawRequest } from "./raw-http.js";

/** What part of a token's life is left when its holder logs in again. */
const RENEW_WHEN_LEFT = 1 / 3;

export class FuzzCredentials {
  private readonly current = new Map<Holder, string>();
  /** First token → current token, for the holders renewed so far. */
  private readonly renewed = new Map<string, string>();
  /** Logins made to renew a token so far. */
  renewals = 0;

  constructor(
    private readonly api: Api,
    private readonly logins: Record<Holder, { tenant: string; email: string }>,
    /** The tokens the requests are generated with (World.tokens). */
    private readonly first: Record<Holder, string>,
  ) {
    for (const holder of Object.keys(first) as Holder[]) this.current.set(holder, first[holder]);
  }

  /** The holder's token now (for the run's own reads, e.g. the snapshots of stored data). */
  token(holder: Holder): string {
    return this.current.get(holder)!;
  }

  /** Logs in again every holder whose token has less than a third of its life left. */
  async renewDue(now = Date.now()): Promise<void> {
    for (const [holder, token] of this.current) {
      const { iat, exp } = jwtPayload(token) as { iat: number; exp: number };
      if (exp * 1000 - now > (exp - iat) * 1000 * RENEW_WHEN_LEFT) continue;
      const fresh = await this.api.login(this.logins[holder]);
      const first = this.first[holder];
      expect(fresh.length, `${holder}'s renewed token has the length of the first`).to.equal(first.length);
      this.current.set(holder, fresh);
      this.renewed.set(first, fresh);
      this.renewals++;
    }
  }

  /** The request as it goes on the wire: every first token in it replaced by its holder's current one. */
  onWire(req: RawRequest): RawRequest {
    if (this.renewed.size === 0) return req;
    const swap = (text: string) => {
      let out = text;
      for (const [first, fresh] of this.renewed) out = out.replaceAll(first, fresh);
      return out;
    };
    return {
      ...req,
      headers: req.headers.map(([name, value]) => [name, typeof value === "string" ? swap(value) : value] as const),
      // Protocol-level requests are bytes; a token in them is ASCII, so latin1 round-trips every other byte.
      raw: req.raw && Buffer.from(swap(req.raw.toString("latin1")), "latin1"),
    };
  }
}
