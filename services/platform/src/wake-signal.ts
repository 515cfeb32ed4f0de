// A loop's pause that something can cut short: a worker waits for its poll interval, or until it is
// roused (a notification, a finished job, a stop). A rouse while no pause waits is kept, so the next
// pause returns at once: work announced during a busy round is never slept through.
export class WakeSignal {
  private wake: (() => void) | undefined;
  private woken = false;

  /** Ends the pause under way, or the next one at once. */
  rouse(): void {
    this.woken = true;
    this.wake?.();
  }

  /** Waits `ms` (a timer that keeps no process alive), or until roused. */
  pause(ms: number): Promise<void> {
    if (this.woken) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wake = undefined;
        this.woken = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      timer.unref();
      this.wake = done;
    });
  }
}
