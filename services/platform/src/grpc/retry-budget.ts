// The retry budget (gRPC's retryThrottling, gRFC A6): how many retries a client may add to the calls
// it sends, so that retries never multiply the load on a peer that is failing.

/**
 * The budget of every channel to one target: an attempt answered UNAVAILABLE costs a token, a call
 * answered OK earns a tenth of one, and no retry is sent while half or fewer of the 100 are left — so
 * a peer that keeps failing gets at most 50 retries in a burst (every read in flight on a replica that
 * was killed is retried), then about one for every ten calls that succeed: never three times the load.
 * grpc-js applies it to its own retries (the service config, client.ts).
 */
export const RETRY_BUDGET = { maxTokens: 100, tokenRatio: 0.1 } as const;

/** The same budget for the retry the client makes itself (a read whose answer had begun: client.ts). */
export class RetryBudget {
  private tokens: number = RETRY_BUDGET.maxTokens;

  succeeded(): void {
    this.tokens = Math.min(this.tokens + RETRY_BUDGET.tokenRatio, RETRY_BUDGET.maxTokens);
  }

  failed(): void {
    this.tokens = Math.max(this.tokens - 1, 0);
  }

  get allowsRetry(): boolean {
    return this.tokens > RETRY_BUDGET.maxTokens / 2;
  }
}

const budgets = new WeakMap<object, RetryBudget>();

/** The budget of a channel, shared by every client made on it. */
export function retryBudgetOf(channel: object): RetryBudget {
  let budget = budgets.get(channel);
  if (!budget) budgets.set(channel, (budget = new RetryBudget()));
  return budget;
}
