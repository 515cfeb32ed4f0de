// A push-to-pull bridge for server streams: producers push, the handler yields in order;
// close() ends the stream, fail() ends it with an error. With a bound, a consumer that falls more
// than `maxBuffered` (as `sizeOf` measures) behind fails instead of holding ever more in memory.
export interface QueueBound<T> {
  maxBuffered: number;
  sizeOf(item: T): number;
  /** The error the consumer gets (instead of what was waiting for it). */
  overflow(): unknown;
}

export class AsyncQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private buffered = 0;

  constructor(private readonly bound?: QueueBound<T>) {}

  private waiting: ((r: IteratorResult<T>) => void) | undefined;
  private failWaiting: ((err: unknown) => void) | undefined;
  private closed = false;
  private error: unknown;

  push(item: T): void {
    if (this.closed) return;
    if (this.waiting) {
      const resolve = this.waiting;
      this.waiting = this.failWaiting = undefined;
      resolve({ value: item, done: false });
    } else {
      this.items.push(item);
      if (this.bound) {
        this.buffered += this.bound.sizeOf(item);
        if (this.buffered > this.bound.maxBuffered) {
          this.items.length = 0;
          this.buffered = 0;
          this.fail(this.bound.overflow());
        }
      }
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.waiting) {
      const resolve = this.waiting;
      this.waiting = this.failWaiting = undefined;
      resolve({ value: undefined, done: true });
    }
  }

  fail(err: unknown): void {
    if (this.closed) return;
    this.error = err;
    this.closed = true;
    if (this.failWaiting) {
      const reject = this.failWaiting;
      this.waiting = this.failWaiting = undefined;
      reject(err);
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        if (this.items.length > 0) {
          const item = this.items.shift() as T;
          if (this.bound) this.buffered -= this.bound.sizeOf(item);
          return Promise.resolve({ value: item, done: false });
        }
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- passes on what fail() was given, as thrown upstream
        if (this.error !== undefined) return Promise.reject(this.error);
        if (this.closed) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => {
          this.waiting = resolve;
          this.failWaiting = reject;
        });
      },
      return: () => {
        this.close();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}
