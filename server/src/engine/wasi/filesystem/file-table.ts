// The file descriptors and open objects of one GuestFilesystem (one invocation).
//
// Invariants:
// - A host fd is only ever reached through its FdHandle, and a closed handle forgets its number:
//   the OS reuses numbers at once, so a number kept past close() could reach another invocation's
//   file (or the server's).
// - A handle is shared by a descriptor and the streams made from it (reference counted): dropping
//   the descriptor while a stream lives is fine; the fd is closed with the last reference.
// - revoke() closes every fd still open, whoever holds it; every object of the table fails from
//   then on.
import { closeSync } from "node:fs";

/** A host file descriptor shared by reference count. */
export class FdHandle {
  #fd: number | undefined;
  #references = 1;
  readonly #table: FileTable;

  constructor(fd: number, table: FileTable) {
    this.#fd = fd;
    this.#table = table;
  }

  /** The fd number, while open. */
  get fd(): number {
    if (this.#fd === undefined) throw "bad-descriptor";
    return this.#fd;
  }

  retain(): this {
    if (this.#fd === undefined) throw "bad-descriptor";
    this.#references++;
    return this;
  }

  release(): void {
    if (--this.#references <= 0) this.close();
  }

  /** Closes the fd now, whatever still refers to it. */
  close(): void {
    const fd = this.#fd;
    if (fd === undefined) return;
    this.#fd = undefined;
    this.#table.forget(this);
    try {
      closeSync(fd);
    } catch {
      // Already unusable either way; the number is forgotten.
    }
  }
}

export class FileTable {
  readonly #limit: number;
  readonly #handles = new Set<FdHandle>();
  #open = 0;
  #revoked = false;

  /** `limit`: descriptors and streams open at once (preopens not counted). */
  constructor(limit: number) {
    this.#limit = limit;
  }

  get revoked(): boolean {
    return this.#revoked;
  }

  /** Takes ownership of an fd just opened. */
  hold(fd: number): FdHandle {
    const handle = new FdHandle(fd, this);
    this.#handles.add(handle);
    if (this.#revoked) {
      handle.close();
      throw "not-permitted";
    }
    return handle;
  }

  forget(handle: FdHandle): void {
    this.#handles.delete(handle);
  }

  /** Counts one more open descriptor or stream; past the limit it is refused. */
  admit(): void {
    if (this.#revoked) throw "not-permitted";
    if (this.#open >= this.#limit) throw "insufficient-memory";
    this.#open++;
  }

  /** One admitted object is gone. */
  leave(): void {
    if (this.#open > 0) this.#open--;
  }

  /** Runs `create` as one admitted object: not counted if it fails. */
  admitted<T>(create: () => T): T {
    this.admit();
    try {
      return create();
    } catch (error) {
      this.leave();
      throw error;
    }
  }

  revoke(): void {
    this.#revoked = true;
    for (const handle of [...this.#handles]) handle.close();
  }
}
