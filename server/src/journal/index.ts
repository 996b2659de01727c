export { Journal, type WatchOptions } from "./journal.ts";
export type { EventBody, JournalEvent, NoteEvent, OperationEvent, SentOperation } from "./events.ts";
