import { Worker } from "node:worker_threads";
import { BundleFormatError } from "@skillenv/client/bundle";
import { serviceError } from "../../errors/index.ts";
import type { SkillMdFields } from "./read.ts";
import type { ParseReply } from "./skill-md-worker.ts";

interface Job {
  readonly bytes: Uint8Array;
  resolve(fields: SkillMdFields): void;
  reject(error: Error): void;
}

/**
 * Up to `maxThreads` worker threads parsing SKILL.md, one file each at a time, so that no YAML is
 * parsed on the main thread. Threads start when first needed and live until close(); a thread
 * that dies fails its job and is replaced by the next one started.
 */
export class SkillMdParsers {
  readonly #maxThreads: number;
  readonly #idle: Worker[] = [];
  readonly #all = new Set<Worker>();
  readonly #queue: Job[] = [];
  #closed = false;

  constructor(maxThreads: number) {
    this.#maxThreads = maxThreads;
  }

  /** SKILL.md's name and description, or the BundleFormatError the file deserves. */
  parse(bytes: Uint8Array): Promise<SkillMdFields> {
    if (this.#closed) return Promise.reject(shuttingDown());
    return new Promise((resolve, reject) => {
      this.#queue.push({ bytes, resolve, reject });
      this.#dispatch();
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const job of this.#queue.splice(0)) job.reject(shuttingDown());
    await Promise.all(Array.from(this.#all, (worker) => worker.terminate()));
  }

  #dispatch(): void {
    while (this.#queue.length > 0 && !this.#closed) {
      const worker = this.#idle.pop() ?? this.#start();
      if (worker === undefined) return;
      const job = this.#queue.shift()!;
      void this.#run(worker, job);
    }
  }

  #start(): Worker | undefined {
    if (this.#all.size >= this.#maxThreads) return undefined;
    const worker = new Worker(new URL("./skill-md-worker.ts", import.meta.url));
    // Idle parsers must not keep the process alive.
    worker.unref();
    this.#all.add(worker);
    return worker;
  }

  async #run(worker: Worker, job: Job): Promise<void> {
    const reply = await exchange(worker, job.bytes).catch((error: Error) => error);
    if (reply instanceof Error) {
      // The thread is dead or dying; the next job starts a new one.
      this.#all.delete(worker);
      void worker.terminate();
      job.reject(this.#closed ? shuttingDown() : reply);
      return this.#dispatch();
    }
    this.#idle.push(worker);
    if (reply.ok) job.resolve(reply.fields);
    else job.reject(reply.code === undefined ? new Error(`parsing SKILL.md failed: ${reply.message}`) : new BundleFormatError(reply.code, reply.message));
    this.#dispatch();
  }
}

/** One message out, one reply back; the thread failing or exiting instead rejects. */
function exchange(worker: Worker, bytes: Uint8Array): Promise<ParseReply> {
  return new Promise((resolve, reject) => {
    const settle = (finish: () => void) => {
      worker.off("message", onMessage).off("error", onError).off("exit", onExit);
      finish();
    };
    const onMessage = (reply: ParseReply) => settle(() => resolve(reply));
    const onError = (error: Error) => settle(() => reject(new Error(`the SKILL.md parser thread failed: ${error.message}`)));
    const onExit = (code: number) => settle(() => reject(new Error(`the SKILL.md parser thread exited (code ${code})`)));
    worker.on("message", onMessage).on("error", onError).on("exit", onExit);
    worker.postMessage(bytes);
  });
}

function shuttingDown(): Error {
  return serviceError("unavailable", "the server is shutting down");
}
