import type { EnvironmentKindName } from "../environments/index.ts";
import { isId } from "../ids/index.ts";
import { readPage, type Page, type PageRequest, type Store, type Table } from "../storage/index.ts";

/** A session as stored: what it binds and places, and where its environments stand. */
export interface SessionRecord {
  id: string;
  workspace: string;
  createdAt: string;
  endedAt?: string;
  lifecycle: Lifecycle;
  environments: EnvironmentRecord[];
  tools: ToolRecord[];
}

/** "ending" and "deleting" last from the start of EndSession / DeleteSession until they finish. */
export type Lifecycle = "active" | "ending" | "ended" | "deleting";

export interface EnvironmentRecord {
  name: string;
  setup: "automatic" | "manual";
  state: EnvironmentState;
  kind: EnvironmentKindName;
  /** The kind's own options as its `authorize` returned them (for the service environment: grants). */
  options: unknown;
}

export type EnvironmentState = "pending" | "ready" | "failed" | "detached";

export interface ToolRecord {
  name: string;
  description: string;
  /** JSON Schema, as JSON text. */
  inputSchema: string;
  environment: string;
  /** As the environment kind's `checkImplementation` returned it. */
  implementation: unknown;
  /** JSON text handed to every invocation. */
  configuration: string;
  /** "always": a run's call of the tool waits for a person's decision (docs/runs.md, "Approvals"); absent: never. */
  approval?: "always";
}

interface Transition {
  workspace: string;
  lifecycle: "ending" | "deleting";
}

/**
 * Sessions keyed `<workspace>/<id>`, so a workspace's range scan never reaches another's and ids
 * sort by time; an index from id to workspace, for recovery, which knows only session ids; and
 * the sessions in the middle of ending or deletion, so that a restart can finish them.
 */
export class SessionRecords {
  readonly #store: Store;
  readonly #sessions: Table<SessionRecord>;
  readonly #workspaces: Table<string>;
  readonly #transitions: Table<Transition>;

  constructor(store: Store) {
    this.#store = store;
    this.#sessions = store.table<SessionRecord>("sessions");
    this.#workspaces = store.table<string>("session-workspaces");
    this.#transitions = store.table<Transition>("session-transitions");
  }

  get(workspace: string, id: string): Promise<SessionRecord | undefined> {
    return this.#sessions.get(key(workspace, id));
  }

  /** Any workspace's session, for recovery. */
  async byId(id: string): Promise<SessionRecord | undefined> {
    const workspace = await this.#workspaces.get(id);
    return workspace === undefined ? undefined : this.get(workspace, id);
  }

  create(record: SessionRecord): Promise<void> {
    return this.#store.write([this.#sessions.putOp(key(record.workspace, record.id), record), this.#workspaces.putOp(record.id, record.workspace)]);
  }

  /** Stores the record; entering "ending" or "deleting" is remembered for a restart, atomically. */
  put(record: SessionRecord): Promise<void> {
    const ops = [this.#sessions.putOp(key(record.workspace, record.id), record)];
    if (record.lifecycle === "ending" || record.lifecycle === "deleting") {
      ops.push(this.#transitions.putOp(record.id, { workspace: record.workspace, lifecycle: record.lifecycle }));
    } else {
      ops.push(this.#transitions.deleteOp(record.id));
    }
    return this.#store.write(ops);
  }

  delete(record: SessionRecord): Promise<void> {
    return this.#store.write([
      this.#sessions.deleteOp(key(record.workspace, record.id)),
      this.#workspaces.deleteOp(record.id),
      this.#transitions.deleteOp(record.id),
    ]);
  }

  /** A page of the workspace's sessions, newest first; a page token carries the last id. */
  page(workspace: string, request: PageRequest, maxBytes: number): Promise<Page<SessionRecord>> {
    return readPage(this.#sessions, request, { prefix: `${workspace}/`, reverse: true, isCursor: (id) => isId("ses", id), maxBytes });
  }

  /** Sessions whose ending or deletion had started when the process stopped. */
  async interrupted(): Promise<SessionRecord[]> {
    const transitions = await this.#transitions.entries({});
    const records = await Promise.all(transitions.map(([id, { workspace }]) => this.get(workspace, id)));
    return records.filter((record) => record !== undefined);
  }
}

function key(workspace: string, id: string): string {
  return `${workspace}/${id}`;
}
