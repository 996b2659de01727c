// A worker process of the pool (docs/environments.md): started by the pool inside its sandbox,
// it loads prepared components (glue module + core modules, read from the prepared directory and
// compiled here), runs each invocation in a fresh instance, and relays host calls to the pool
// over its IPC channel. Guests that wait on the host are suspended by JSPI and hold no thread, so
// one worker carries many agent loops; a guest that computes holds this process's thread until it
// returns, traps, runs out of fuel, or the watchdog stops the process at its deadline.
//
// Descriptors: 3 is the IPC channel (Node's), 4 the watchdog's report to the pool, 5 the
// synchronous channel (sync-channel.ts: workspace quota leases), 6 the start register
// (pool/start-register.ts).
import type { FromWorker, ToWorker, WorkerBoot } from "../pool/protocol.ts";
import { StartRegister } from "../pool/start-register.ts";
import { setBlockingCaller } from "../wasi/blocking.ts";
import { Components } from "./components.ts";
import { NOT_A_WORKER_PROCESS } from "./entries.ts";
import { Invocations } from "./invocations.ts";
import { yieldCpu } from "./priority.ts";
import { ThreadClaim } from "./thread-claim.ts";
import { SyncChannel } from "./sync-channel.ts";

const WATCHDOG_FD = 4;
const SYNC_FD = 5;
const REGISTER_FD = 6;

if (!process.send) throw new Error(NOT_A_WORKER_PROCESS);
const boot = JSON.parse(process.env.SKILLENV_WORKER ?? "null") as WorkerBoot;
// A stray rejection from guest glue (e.g. a dropped guest's internal promise) must not take the
// worker, and every invocation in it, down. The worker's own promises are all handled.
process.on("unhandledRejection", () => undefined);
// The pool is gone (or closed the channel): nothing more can be reported, so stop.
process.on("disconnect", () => process.exit(0));

/** Sends a message; `flushed` is called once it is in the kernel's socket buffer (the pool reads it even if this process dies). */
function send(message: FromWorker, flushed?: () => void): void {
  process.send!(message, undefined, undefined, flushed ? () => flushed() : undefined);
}

const components = new Components(boot, send);
const claim = new ThreadClaim(boot.deadlineGraceMs, WATCHDOG_FD);
const invocations = new Invocations(boot, components, claim, new SyncChannel(SYNC_FD), new StartRegister(REGISTER_FD), send);
setBlockingCaller(() => invocations.onThread());

// Every thread of this process but the watchdog's yields the CPU to the server (priority.ts):
// this one, where guests run, and V8's, which compile the components a worker loads (a
// replacement all of its predecessor's at once) and collect garbage. Messages that arrive before
// (the pool sends loads at once) wait: nothing is compiled before.
let lowering: Promise<void> | undefined = claim.watchdogThread.then(async (watchdog) => {
  await yieldCpu(boot.niceness, watchdog);
  lowering = undefined;
  send({ type: "ready" });
});

process.on("message", (message: ToWorker) => {
  if (lowering) void lowering.then(() => handle(message));
  else handle(message);
});

function handle(message: ToWorker): void {
  switch (message.type) {
    case "load":
      components.load(message);
      break;
    case "unload":
      components.unload(message.component);
      break;
    case "invoke":
      void invocations.start(message);
      break;
    case "host-result":
      invocations.hostResult(message);
      break;
    case "cancel":
      // Handled between macrotasks, so this invocation's guest is not on the thread: it is
      // waiting (on the host, a timer, I/O) or not started, and stops cleanly.
      invocations.cancel(message.invocation);
      break;
    case "report":
      send({
        type: "report",
        spares: components.spareStats(),
        memories: { ...components.recycling.stats },
        loaded: components.loadedCount(),
        rssBytes: process.memoryUsage.rss(),
        typeStripper: typeStripperLoaded(),
      });
      break;
  }
}

/** Whether this thread loaded Node's TypeScript stripper (amaro): what the compile cache spares it. */
function typeStripperLoaded(): boolean {
  // process.moduleLoadList: Node's own record of the internal modules this thread loaded.
  const loaded = (process as unknown as { moduleLoadList: string[] }).moduleLoadList;
  return loaded.some((entry) => entry.includes("internal/deps/amaro/"));
}
