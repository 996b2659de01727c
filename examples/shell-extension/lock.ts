/**
 * Who may use a binding's workspace at a time. Executes share it; a Stage (and a Teardown) has it
 * alone, so that no command runs while a directory is replaced: a command whose working directory
 * is inside `skills/` would otherwise keep reaching the tree after it is moved out of the
 * workspace, and could swap a directory being removed for a symlink to a host path. A command
 * ends, with everything it started, before its Execute does (command.ts), so "no Execute in
 * flight" means "no command running" (but see README.md: without bubblewrap a command can leave
 * its process group).
 *
 * Waiters are served in order of arrival: an Execute that arrives while a Stage waits queues
 * behind it, so a stream of Executes cannot starve a Stage, and a Stage waits only for the
 * Executes that came before it. Nothing waits forever: every wait ends when its signal aborts
 * (a deadline, a Cancel, the caller hanging up), and every holder's work ends by its deadline.
 */

export type Access = "shared" | "exclusive";

/** Gives the binding back; calling it again does nothing. */
export type Release = () => void;

interface Waiter {
  access: Access;
  grant(): void;
}

interface State {
  shared: number;
  exclusive: boolean;
  readonly queue: Waiter[];
}

export class BindingLocks {
  /** Only bindings someone holds or waits for: an idle binding's state is dropped. */
  readonly #states = new Map<string, State>();

  /**
   * Waits until the binding `id` can be had with `access`; rejects with the signal's reason,
   * having taken nothing, when `signal` aborts first.
   */
  acquire(id: string, access: Access, signal: AbortSignal): Promise<Release> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) {
        reject(signal.reason);
        return;
      }
      const state = this.#stateOf(id);
      const onAbort = (): void => {
        state.queue.splice(state.queue.indexOf(waiter), 1);
        // The waiter left the head of the queue, perhaps: those behind it may go now.
        this.#grant(id, state);
        reject(signal.reason);
      };
      const waiter: Waiter = {
        access,
        grant: () => {
          signal.removeEventListener("abort", onAbort);
          resolve(this.#releaser(id, state, access));
        },
      };
      signal.addEventListener("abort", onAbort, { once: true });
      state.queue.push(waiter);
      this.#grant(id, state);
    });
  }

  #stateOf(id: string): State {
    let state = this.#states.get(id);
    if (state === undefined) {
      state = { shared: 0, exclusive: false, queue: [] };
      this.#states.set(id, state);
    }
    return state;
  }

  /** Lets the waiters at the head of the queue in, as many as may hold the binding together. */
  #grant(id: string, state: State): void {
    for (let next = state.queue[0]; next !== undefined; next = state.queue[0]) {
      const free = next.access === "shared" ? !state.exclusive : !state.exclusive && state.shared === 0;
      if (!free) break;
      state.queue.shift();
      if (next.access === "shared") state.shared++;
      else state.exclusive = true;
      next.grant();
    }
    if (state.shared === 0 && !state.exclusive && state.queue.length === 0) this.#states.delete(id);
  }

  #releaser(id: string, state: State, access: Access): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (access === "shared") state.shared--;
      else state.exclusive = false;
      this.#grant(id, state);
    };
  }
}
