// What each entry module of a worker process says when it is loaded outside its place. Both
// check before they do anything, so loading one elsewhere (fill-compile-cache.ts does, to
// compile it) runs none of it.

/** worker/main.ts, loaded by a process without the pool's IPC channel. */
export const NOT_A_WORKER_PROCESS = "engine/worker/main.ts runs as a worker process of the pool, with an IPC channel";

/** worker/watchdog-thread.ts, loaded outside the worker thread that ThreadClaim starts. */
export const NOT_THE_WATCHDOG = "engine/worker/watchdog-thread.ts runs as the watchdog thread of a worker process";
