import { readSync, writeSync } from "node:fs";
import type { LeaseAnswer, LeaseRequest, SyncNote } from "../pool/protocol.ts";

/**
 * The worker's end of its synchronous channel to the pool (protocol.ts `SyncNote`): a lease
 * request is written with a blocking write, then blocks the thread until the pool answers. Guests
 * run on one thread: one request at a time.
 */
export class SyncChannel {
  readonly #fd: number;
  readonly #buffer = Buffer.alloc(256);

  constructor(fd: number) {
    this.#fd = fd;
  }

  /** Asks for `bytes` more workspace quota; answers what the pool granted. */
  lease(request: LeaseRequest): number {
    this.#write({ type: "lease", ...request });
    let line = "";
    while (!line.endsWith("\n")) {
      const read = readSync(this.#fd, this.#buffer);
      if (read === 0) throw new Error("the pool closed the worker's channel");
      line += this.#buffer.toString("utf8", 0, read);
    }
    const answer = JSON.parse(line) as LeaseAnswer;
    return Math.max(0, Math.floor(answer.granted));
  }

  #write(note: SyncNote): void {
    writeSync(this.#fd, `${JSON.stringify(note)}\n`);
  }
}
