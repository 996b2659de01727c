import type { ConversationMessage } from "../models/index.ts";

/** Sessions whose conversation is kept, at most. */
const MAX_SESSIONS = 4096;
/** Conversations kept, at most, in characters of their JSON (the parsed messages take a few times that). */
const MAX_CHARS = 16 * 1024 * 1024;

interface Entry {
  messages: readonly ConversationMessage[];
  chars: number;
}

/**
 * The conversation of the sessions that ran last, so that a session's next run does not read
 * and parse its whole history again: least recently used first out, bounded by sessions and by
 * size. It only ever holds what storage holds: a conversation is kept when it was read, grows
 * when a finished run was committed, and is forgotten when one of the session's runs is deleted
 * (or its end could not be written). A read that overlapped such a change is not kept.
 */
export class ConversationCache {
  readonly #entries = new Map<string, Entry>();
  #chars = 0;
  /** Counts forgets, so that a read that started before one is not kept. */
  #forgets = 0;

  /** The kept conversation, or undefined; a hit becomes the most recently used. */
  get(sessionId: string): readonly ConversationMessage[] | undefined {
    const entry = this.#entries.get(sessionId);
    if (!entry) return undefined;
    this.#entries.delete(sessionId);
    this.#entries.set(sessionId, entry);
    return entry.messages;
  }

  /** A token for `keep`: what the cache knew when a read of storage started. */
  readStarted(): number {
    return this.#forgets;
  }

  /** Keeps a conversation read from storage, unless something was forgotten while it was read. */
  keep(sessionId: string, messages: readonly ConversationMessage[], readStarted: number): void {
    if (readStarted !== this.#forgets) return;
    this.#set(sessionId, messages, JSON.stringify(messages).length);
  }

  /** A finished run of the session was committed: its messages join the kept conversation, if there is one. */
  extend(sessionId: string, added: readonly ConversationMessage[]): void {
    const entry = this.#entries.get(sessionId);
    if (!entry || added.length === 0) return;
    this.#set(sessionId, [...entry.messages, ...added], entry.chars + JSON.stringify(added).length);
  }

  forget(sessionId: string): void {
    this.#forgets++;
    this.#remove(sessionId);
  }

  #set(sessionId: string, messages: readonly ConversationMessage[], chars: number): void {
    this.#remove(sessionId);
    if (chars > MAX_CHARS) return;
    this.#entries.set(sessionId, { messages, chars });
    this.#chars += chars;
    for (const [oldest, entry] of this.#entries) {
      if (this.#entries.size <= MAX_SESSIONS && this.#chars <= MAX_CHARS) break;
      this.#entries.delete(oldest);
      this.#chars -= entry.chars;
    }
  }

  #remove(sessionId: string): void {
    const entry = this.#entries.get(sessionId);
    if (!entry) return;
    this.#entries.delete(sessionId);
    this.#chars -= entry.chars;
  }
}
