// The start register of a worker process: a small file the pool creates and hands to the worker
// as a descriptor (not by path: the sandbox does not show it), in which the worker writes, before
// a guest runs, the number of the invocation it runs for. A write to a file needs no reader: it
// costs the worker one pwrite and the pool nothing until it looks, unlike a note on a socket,
// which woke the pool's thread once more per invocation (docs/performance.md). The pool reads it
// when it asks which invocations are running, and once the process is gone: an invocation in
// flight whose number is not there did not run (`unavailable`), one whose number is may have
// (`unknown`). The file is a table of 8-byte slots (a little-endian float64 each: pool numbers
// are safe integers from 1; 0 is an empty slot). A slot holds its number until the invocation's
// receipt is in the kernel's socket buffer (read by the pool before it sees the process end), so
// the number of an invocation in flight is never overwritten; a stale number is one the pool
// settled already, and never reuses.
import { fstatSync, readSync, writeSync } from "node:fs";

const SLOT_BYTES = 8;
/** What the pool reads of a register at most: more slots than a worker ever holds invocations at once. */
const MAX_SLOTS = 64 * 1024;

/** The worker's end: records starts, one slot per invocation whose receipt is not yet sent. */
export class StartRegister {
  readonly #fd: number;
  readonly #record = Buffer.alloc(SLOT_BYTES);
  /** Slots freed, reused before the table grows. */
  readonly #free: number[] = [];
  #slots = 0;

  constructor(fd: number) {
    this.#fd = fd;
  }

  /** Writes `invocation` in a free slot, synchronously; answers the slot, to free once its receipt is sent. */
  record(invocation: number): number {
    const slot = this.#free.pop() ?? this.#slots++;
    this.#record.writeDoubleLE(invocation, 0);
    writeSync(this.#fd, this.#record, 0, SLOT_BYTES, slot * SLOT_BYTES);
    return slot;
  }

  /** The invocation of `slot` has its receipt in the pool's socket: its slot may hold another. */
  free(slot: number): void {
    this.#free.push(slot);
  }
}

/** The pool's end: the invocation numbers in `fd`'s register (of invocations that started, some long settled). */
export function readStartRegister(fd: number): Set<number> {
  const table = Buffer.alloc(Math.min(fstatSync(fd).size, MAX_SLOTS * SLOT_BYTES));
  let length = 0;
  while (length < table.length) {
    const read = readSync(fd, table, length, table.length - length, length);
    if (read === 0) break;
    length += read;
  }
  const started = new Set<number>();
  for (let offset = 0; offset + SLOT_BYTES <= length; offset += SLOT_BYTES) {
    const invocation = table.readDoubleLE(offset);
    if (Number.isSafeInteger(invocation) && invocation > 0) started.add(invocation);
  }
  return started;
}
