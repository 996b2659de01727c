// Blocking WASI calls that suspend the guest instead of its worker's thread. The blocking methods
// of wasi:io (pollable.block, input-stream.blocking-read/-skip, output-stream.blocking-flush and
// -write-and-flush, -write-zeroes-and-flush, -splice) are async imports (JSPI, see
// preparation/toolchain.ts): preview2-shim's would hold the thread until a timer fires or an HTTP
// body moves (a guest asking for a long sleep held its worker, and every guest queued on it,
// without using any fuel). Here a call whose stream or pollable is not ready suspends the guest
// and re-checks with a short backoff, as wasi:io/poll#poll does; one that is ready runs at once,
// synchronously, as before. This filesystem's own streams are always ready.
import { ShimInputStream, ShimOutputStream, ShimPollable } from "./filesystem/shim.ts";
import "./filesystem/index.ts";

/** What a suspended guest tells its invocation (the worker's thread claim and its end). */
export interface SuspendingContext {
  /** Set once the invocation has its receipt: a guest suspended then is never resumed. */
  readonly finished: boolean;
  /** The guest is about to suspend (it leaves the thread). */
  suspending(): void;
  /** The guest is about to resume (it takes the thread). */
  resuming(): void;
}

interface Pollable {
  ready(): boolean;
  [Symbol.dispose]?(): void;
}

/**
 * Suspends the guest until one of `list` is ready; resolves with the indices of the ready ones.
 * A guest whose invocation ended meanwhile (its deadline) is resumed with an exception that
 * unwinds it.
 */
export async function suspendUntilReady(context: SuspendingContext | undefined, list: readonly Pollable[]): Promise<Uint32Array> {
  let delay = 0;
  context?.suspending();
  for (;;) {
    // An Error (not a WASI value): the glue rethrows it, unwinding the guest.
    if (context?.finished) throw new Error("the invocation has ended");
    const ready: number[] = [];
    for (let i = 0; i < list.length; i++) if (list[i]!.ready()) ready.push(i);
    if (ready.length > 0) {
      context?.resuming();
      return new Uint32Array(ready);
    }
    await new Promise((resolve) => (delay === 0 ? setImmediate(resolve) : setTimeout(resolve, delay)));
    delay = Math.min(delay === 0 ? 1 : delay * 2, 16);
  }
}

let onThread: () => SuspendingContext | undefined = () => undefined;

/**
 * Tells the blocking methods which invocation calls them: the one whose guest holds the thread
 * (a worker runs one guest at a time; a resource method cannot be told its caller otherwise).
 */
export function setBlockingCaller(resolve: () => SuspendingContext | undefined): void {
  onThread = resolve;
}

/** Streams whose blocking calls never wait (the worker's stdout, /dev/null): no pollable is asked. */
const neverWait = new WeakSet<object>();

/** `stream`'s blocking calls never wait: they run at once, without asking its pollable (an I/O round trip). */
export function neverBlocks(stream: object): void {
  neverWait.add(stream);
}

type Method = (this: Subscribable, ...args: unknown[]) => unknown;

interface Subscribable {
  subscribe(): Pollable;
}

/**
 * `method` made to wait, suspended, until the pollables it needs are all ready (the object's own;
 * for a splice, its source's too), then run as it was.
 */
function suspendingUntilReady(method: Method, sources: (args: unknown[]) => unknown[] = () => []): Method {
  return function (this: Subscribable, ...args: unknown[]) {
    if (neverWait.has(this)) return method.apply(this, args);
    const waitingOn = [this, ...sources(args)].filter(
      (stream): stream is Subscribable => !neverWait.has(stream as object) && typeof (stream as Subscribable).subscribe === "function",
    );
    const pollables = waitingOn.map((stream) => stream.subscribe());
    const release = () => {
      for (const each of pollables) each[Symbol.dispose]?.();
    };
    if (pollables.every((each) => each.ready())) {
      release();
      return method.apply(this, args);
    }
    const context = onThread();
    const allReady = async () => {
      for (const each of pollables) if (!each.ready()) await suspendUntilReady(context, [each]);
    };
    return allReady()
      .then(() => method.apply(this, args))
      .finally(release);
  };
}

const pollable = ShimPollable.prototype as { block: () => unknown; ready(): boolean };
pollable.block = function block(this: Pollable) {
  if (this.ready()) return undefined;
  return suspendUntilReady(onThread(), [this]).then(() => undefined);
};
const input = ShimInputStream.prototype as unknown as Record<string, Method>;
for (const name of ["blockingRead", "blockingSkip"]) input[name] = suspendingUntilReady(input[name]!);
const output = ShimOutputStream.prototype as unknown as Record<string, Method>;
for (const name of ["blockingFlush", "blockingWriteAndFlush", "blockingWriteZeroesAndFlush"]) output[name] = suspendingUntilReady(output[name]!);
// A splice waits for its source to have something too.
output.blockingSplice = suspendingUntilReady(output.blockingSplice!, ([source]) => [source]);
