/**
 * The environment port (SPEC 3.2, 4.5): what a session needs from any environment, whatever
 * runs behind it (the worker pool, a host process, an HTTP extension). Every operation ends in
 * exactly one terminal receipt; an adapter never throws, never retries, and answers `unknown`
 * exactly when the operation may have been dispatched and no reliable result exists.
 *
 * Adapters know nothing of the journal or storage: the session journals each operation before
 * calling the adapter and records the receipt the adapter returns.
 */

export type OperationKind = "setup" | "stage" | "execute" | "cancel" | "detach" | "teardown";

export type TerminalReceipt = Returned | Failure | Unknown;

export interface Returned {
  outcome: "returned";
  /** JSON text. */
  output: string;
}

export interface Failure {
  outcome: "failure";
  /** Stable snake_case code (the catalogue's, the environment's or the tool's own). */
  code: string;
  message: string;
  /** True only when nothing took effect and trying again later may succeed (e.g. pool_saturated). */
  retryable: boolean;
  details?: Record<string, string>;
}

export interface Unknown {
  outcome: "unknown";
  message: string;
}

/** Receipts that may precede the terminal one. */
export type InterimReceipt = { outcome: "accepted" } | { outcome: "progress"; data: string };

/**
 * What an agent loop reaches on the host (wit/env.wit `skillenv:env/host`): JSON text in, JSON
 * text out; a rejection with `{code, message}` reaches the guest as that failure.
 */
export interface AgentLoopHost {
  callModel(request: string): Promise<string>;
  dispatchTools(calls: string): Promise<string>;
  emit(event: string): void;
  /** How many of the loop's emits the environment dropped before they reached `emit` (past its own limits), told at its end. */
  dropped?(count: number): void;
}

export interface ExecuteOperation {
  operationId: string;
  /** Where the operation's `operation.sent` is in the session's journal. */
  seq: number;
  /** The placed tool's name in the session ("" for a run's agent loop). */
  tool: string;
  /** Opaque to the session: the placement's implementation, as its environment kind defined it. */
  implementation: unknown;
  /** JSON text. */
  configuration: string;
  /** JSON text. */
  input: string;
  /** Absolute Unix time in milliseconds. */
  deadlineMs: number;
  /** Interim receipts, in the order the environment reports them. */
  report(receipt: InterimReceipt): void;
  /** Present when the implementation is an agent loop: its host services. */
  loopHost?: AgentLoopHost;
}

/** A file to place in an environment's workspace; `path` is relative to /workspace and already validated. */
export interface StagedFile {
  path: string;
  bytes: Uint8Array;
}

/** What one stage operation does to a workspace. */
export interface Staging {
  /**
   * Workspace-relative directories removed (recursively, never following a symlink: a symlink
   * in their place is removed itself) before any file is written, so that they hold exactly the
   * files of this stage afterwards. Validated like files' paths. Nothing else is removed.
   */
  replace: readonly string[];
  /** Written in order; an existing file is replaced. */
  files: readonly StagedFile[];
}

/** One (session, environment) binding. */
export interface EnvironmentBinding {
  setup(deadlineMs: number): Promise<TerminalReceipt>;
  /** Whether the environment has a workspace that files can be staged into. */
  readonly stagesFiles: boolean;
  /**
   * Before a run's first turn: removes the directories `staging.replace` names (a run's skills/),
   * then writes `staging.files` into the workspace (skills' supporting files, run files).
   */
  stage(staging: Staging, deadlineMs: number, operationId: string): Promise<TerminalReceipt>;
  execute(operation: ExecuteOperation): Promise<TerminalReceipt>;
  /** Asks the environment to stop `operationId`; the target still ends in its own receipt. */
  cancel(operationId: string, deadlineMs: number): Promise<TerminalReceipt>;
  detach(deadlineMs: number): Promise<TerminalReceipt>;
  teardown(deadlineMs: number): Promise<TerminalReceipt>;
  /**
   * This process lets go of the binding (its session left memory, idle: nothing in flight): frees
   * what it holds here, such as open connections, and tells the environment nothing. The session
   * binds it again when next used.
   */
  release?(): void;
}

export function failure(code: string, message: string, retryable = false, details?: Record<string, string>): Failure {
  return details ? { outcome: "failure", code, message, retryable, details } : { outcome: "failure", code, message, retryable };
}

export function returned(output: string): Returned {
  return { outcome: "returned", output };
}

export function unknown(message: string): Unknown {
  return { outcome: "unknown", message };
}
