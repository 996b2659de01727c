/**
 * A gate for tests of a concurrency bound: each call the test intercepts, once counted, waits at
 * `arrived()` until `full()` holds, and then every held call and every later one goes through. The
 * calls in flight together are then all those the bound lets start, however slow the machine,
 * instead of those that happened to overlap within a fixed sleep; a bound not kept shows as more
 * of them in flight while the first ones are held.
 *
 * If `full()` never holds (nothing runs concurrently), the gate opens after `giveUpMs`, so that the
 * test fails on what it counted rather than on its timeout. No passing run waits for that clock.
 */
export function gateUntil(full: () => boolean, giveUpMs = 20_000): { arrived(): Promise<void> } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const timer = setTimeout(() => open(), giveUpMs);
  timer.unref();
  return {
    arrived() {
      if (full()) {
        clearTimeout(timer);
        open();
      }
      return opened;
    },
  };
}
