// A request's cancellation at the edge: the client went away, or its live stream ended. Everything the
// request started upstream is cancelled with it.
//
// Most requests make one unary call and finish; an AbortController for each of them is expensive here:
// on Node 20 every controller keeps its request's objects alive through young-generation GC (they
// are promoted and wait for a full GC), and the platform client's abort listener ties the whole gRPC
// call to it. So a unary call gets `callSignal`: this object itself, which has the four members the
// platform client reads of a call's signal (`aborted`, `reason`, `addEventListener` and
// `removeEventListener` for "abort"). A real AbortSignal (`signal`) is made only when something asks
// for one — a live stream's calls, the shared feed, the event-stream writer.
type AbortListener = (event: Event) => void;

export class RequestCancellation {
  #aborted = false;
  #reason: unknown;
  /** What the request's calls in flight asked to be told (none until the first call). */
  #listeners: AbortListener[] | undefined;
  #controller: AbortController | undefined;

  get aborted(): boolean {
    return this.#aborted;
  }

  get reason(): unknown {
    return this.#reason;
  }

  /** Cancels once: the listeners run, and a real signal made earlier aborts too. */
  abort(reason: unknown = new DOMException("This operation was aborted", "AbortError")): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    const listeners = this.#listeners;
    this.#listeners = undefined;
    this.#controller?.abort(reason);
    if (!listeners) return;
    const event = new Event("abort");
    for (const listener of listeners) {
      // As an EventTarget does: one listener's error does not keep the others from running; it is reported.
      try {
        listener(event);
      } catch (err) {
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }

  /** A real AbortSignal for what needs one (made on first use; already aborted if the request was). */
  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  /** The signal for a unary call through the platform client (see above): no AbortController made. */
  get callSignal(): AbortSignal {
    return this as unknown as AbortSignal;
  }

  addEventListener(type: string, listener: AbortListener): void {
    if (type === "abort" && !this.#aborted) (this.#listeners ??= []).push(listener);
  }

  removeEventListener(type: string, listener: AbortListener): void {
    const at = type === "abort" ? (this.#listeners?.indexOf(listener) ?? -1) : -1;
    if (at >= 0) this.#listeners!.splice(at, 1);
  }
}
