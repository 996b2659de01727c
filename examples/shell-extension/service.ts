/**
 * ExtensionEnvironmentService (proto/skillenv/extension/v1/extension.proto) over a directory per
 * binding: `<root>/<SHA-256 of the binding id, hex>/workspace`. The directory is the binding's
 * state and survives a restart of the extension; the operation ids seen (to refuse a repeated
 * one) and the operations in flight are kept in memory while the binding is attached. A binding's
 * Stage and its Executes never overlap (lock.ts).
 */
import { createHash, randomUUID } from "node:crypto";
import * as fs from "node:fs/promises";
import * as path from "node:path";
import { fromJson, toJson, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampMs, ValueSchema, type Value } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type {
  ExtensionEnvironmentService,
  Binding,
  CancelRequest,
  DetachRequest,
  ExecuteRequest,
  ExecuteResponseSchema,
  SetupRequest,
  StageRequest,
  TeardownRequest,
} from "../../gen/skillenv/extension/v1/extension_pb.js";
import { LONGEST_TIMER_MS } from "./command.ts";
import { pathSegments, removeInWorkspace, removeTree, WorkspacePathError, writeInWorkspace } from "./files.ts";
import { BindingLocks, type Release } from "./lock.ts";
import type { Sandbox } from "./sandbox.ts";
import { chooseTool, runTool, ToolFailure } from "./tools.ts";

export interface ServiceOptions {
  /** Real path (no symlinks) of the directory bindings live in. */
  root: string;
  sandbox: Sandbox;
  outputLimit: number;
}

type Receipt = MessageInitShape<typeof ExecuteResponseSchema>;

interface Operation {
  readonly abort: AbortController;
  /** False while only Cancel has named it: a cancel that overtook its Execute. */
  claimed: boolean;
  /** Settles when the operation's work is over. */
  finished: Promise<void>;
}

interface Place {
  id: string;
  /** `<root>/<hash>`: removed on teardown. */
  directory: string;
  workspace: string;
}

interface AttachedBinding extends Place {
  readonly operations: Map<string, Operation>;
}

export class ShellExtensionService implements ServiceImpl<typeof ExtensionEnvironmentService> {
  private readonly options: ServiceOptions;
  private readonly attached = new Map<string, AttachedBinding>();
  /** By binding id, not by attachment: a Stage after a Detach still waits for the Executes it stopped. */
  private readonly locks = new BindingLocks();

  constructor(options: ServiceOptions) {
    this.options = options;
  }

  /** The configuration is not read: what a command may reach is the operator's choice, never a session's. */
  async setup(request: SetupRequest): Promise<Record<string, never>> {
    const place = this.place(request.binding);
    await fs.mkdir(place.workspace, { recursive: true });
    this.attach(place);
    return {};
  }

  /**
   * Waits until no Execute of the binding is in flight (none starts meanwhile), then replaces the
   * directories and writes the files. The wait ends at the call's deadline (deadline_exceeded), at
   * a Cancel of its operation id or when the caller hangs up (cancelled), having changed nothing.
   */
  async stage(request: StageRequest, context: HandlerContext): Promise<Record<string, never>> {
    const binding = await this.attachedOrUndefined(request.binding);
    if (binding === undefined) throw new ConnectError("the binding is not set up: call Setup first", Code.FailedPrecondition);
    // Writing the same files again is harmless, so a Stage without an operation id is taken too.
    let operation: Operation | undefined;
    if (request.operationId !== "") {
      operation = claim(binding, request.operationId);
      if (operation === undefined) throw new ConnectError(`duplicate_operation: "${request.operationId}" was already sent`, Code.AlreadyExists);
    }
    try {
      // Every path is checked before anything is waited for, removed or written.
      for (const directory of request.replaceDirectories) pathSegments(directory);
      for (const file of request.files) pathSegments(file.path);
    } catch (error) {
      throw connectErrorOf(error);
    }
    const signal = operation === undefined ? context.signal : AbortSignal.any([context.signal, operation.abort.signal]);
    const release = await this.waitForBinding(binding.id, signal, "the Stage");
    try {
      // Moved out to the binding's directory, beside the workspace, and removed from there.
      for (const directory of request.replaceDirectories)
        await removeInWorkspace(binding.workspace, directory, path.join(binding.directory, `.removing-${randomUUID()}`));
      for (const file of request.files) await writeInWorkspace(binding.workspace, file.path, file.content);
    } catch (error) {
      throw connectErrorOf(error);
    } finally {
      release();
    }
    return {};
  }

  async *execute(request: ExecuteRequest, context: HandlerContext): AsyncGenerator<Receipt> {
    const binding = await this.attachedOrUndefined(request.binding);
    if (binding === undefined) {
      yield failure("not_set_up", "the binding is not set up: call Setup first");
      return;
    }
    const operation = claim(binding, request.operationId);
    if (operation === undefined) {
      yield failure("duplicate_operation", `"${request.operationId}" was already sent; an operation runs at most once`);
      return;
    }
    yield { receipt: { case: "accepted", value: {} } };
    // A caller that hangs up stops the operation as Cancel would.
    const running = this.run(request, binding, AbortSignal.any([operation.abort.signal, context.signal]));
    operation.finished = running.then(() => undefined);
    yield await running;
  }

  async cancel(request: CancelRequest): Promise<Record<string, never>> {
    const binding = await this.attachedOrUndefined(request.binding);
    if (binding === undefined) return {};
    operationOf(binding, request.operationId).abort.abort();
    return {};
  }

  /** The session ended: its operations are stopped, its files stay. */
  async detach(request: DetachRequest): Promise<Record<string, never>> {
    await this.release(this.place(request.binding).id);
    return {};
  }

  /** Stops the binding's operations, waits for a Stage in progress to end, and removes the directory. */
  async teardown(request: TeardownRequest, context: HandlerContext): Promise<Record<string, never>> {
    const place = this.place(request.binding);
    await this.release(place.id);
    const release = await this.waitForBinding(place.id, context.signal, "the Teardown");
    try {
      await removeTree(place.directory);
    } finally {
      release();
    }
    return {};
  }

  /** Stops every operation in flight, for shutdown. */
  async close(): Promise<void> {
    await Promise.all([...this.attached.keys()].map((id) => this.release(id)));
  }

  /**
   * Never rejects: every outcome is a receipt. Waits first while a Stage of the binding is in
   * progress or waiting (until the deadline, or a cancel).
   */
  private async run(request: ExecuteRequest, binding: AttachedBinding, signal: AbortSignal): Promise<Receipt> {
    const deadlineMs = request.deadline === undefined ? undefined : timestampMs(request.deadline);
    const remainingMs = (): number | undefined => (deadlineMs === undefined ? undefined : deadlineMs - Date.now());
    try {
      if (signal.aborted) throw new ToolFailure("cancelled", "the operation was cancelled before it started");
      const remainingAtStart = remainingMs();
      if (remainingAtStart !== undefined && remainingAtStart <= 0) throw new ToolFailure("timeout", "the deadline passed before the operation started");
      const tool = chooseTool(json(request.implementation), request.tool);
      const waitSignal = remainingAtStart === undefined ? signal : AbortSignal.any([signal, AbortSignal.timeout(Math.min(remainingAtStart, LONGEST_TIMER_MS))]);
      const release = await this.locks.acquire(binding.id, "shared", waitSignal).catch(() => {
        if (signal.aborted) throw new ToolFailure("cancelled", "the operation was cancelled while it waited for a Stage of its binding");
        throw new ToolFailure("timeout", "the deadline passed while the operation waited for a Stage of its binding");
      });
      try {
        const { workspace } = binding;
        const output = await runTool(tool, json(request.input), {
          workspace,
          sandbox: this.options.sandbox,
          outputLimit: this.options.outputLimit,
          remainingMs: remainingMs(),
          signal,
        });
        return { receipt: { case: "returned", value: { output: fromJson(ValueSchema, output) } } };
      } finally {
        release();
      }
    } catch (error) {
      if (error instanceof ToolFailure) return failure(error.code, error.message, error.details);
      console.error(`shell-extension: operation "${request.operationId}" failed unexpectedly:`, error);
      return failure("internal_error", error instanceof Error ? error.message : String(error));
    }
  }

  /**
   * The binding alone, once every Execute that came before has ended. A wait the signal ends is
   * deadline_exceeded when the call's deadline passed, else cancelled (a Cancel, a hang-up).
   */
  private async waitForBinding(id: string, signal: AbortSignal, what: string): Promise<Release> {
    try {
      return await this.locks.acquire(id, "exclusive", signal);
    } catch (reason) {
      if (reason instanceof ConnectError && reason.code === Code.DeadlineExceeded) {
        throw new ConnectError(
          `deadline_exceeded: the deadline passed while ${what} waited for the binding's operations to end; nothing was changed`,
          Code.DeadlineExceeded,
        );
      }
      throw new ConnectError(`cancelled: ${what} was cancelled while it waited for the binding's operations to end; nothing was changed`, Code.Canceled);
    }
  }

  private place(binding: Binding | undefined): Place {
    if (!binding?.id) throw new ConnectError("binding.id is required", Code.InvalidArgument);
    const directory = path.join(this.options.root, createHash("sha256").update(binding.id).digest("hex"));
    return { id: binding.id, directory, workspace: path.join(directory, "workspace") };
  }

  private attach(place: Place): AttachedBinding {
    const binding = this.attached.get(place.id) ?? { ...place, operations: new Map() };
    this.attached.set(place.id, binding);
    return binding;
  }

  /** A binding set up before a restart or a Detach is found by its directory. */
  private async attachedOrUndefined(binding: Binding | undefined): Promise<AttachedBinding | undefined> {
    const place = this.place(binding);
    const known = this.attached.get(place.id);
    if (known !== undefined) return known;
    const exists = await fs.stat(place.workspace).then(
      (stat) => stat.isDirectory(),
      () => false,
    );
    return exists ? this.attach(place) : undefined;
  }

  private async release(id: string): Promise<void> {
    const binding = this.attached.get(id);
    if (binding === undefined) return;
    this.attached.delete(id);
    for (const operation of binding.operations.values()) operation.abort.abort();
    await Promise.all([...binding.operations.values()].map((operation) => operation.finished));
  }
}

/** The operation for a new id; undefined when the id was already sent (the service never retries, so this is a protocol error). */
function claim(binding: AttachedBinding, operationId: string): Operation | undefined {
  if (operationId === "") throw new ConnectError("operation_id is required", Code.InvalidArgument);
  const operation = operationOf(binding, operationId);
  if (operation.claimed) return undefined;
  operation.claimed = true;
  return operation;
}

/** The operation an id names, recorded at its first mention. */
function operationOf(binding: AttachedBinding, operationId: string): Operation {
  const known = binding.operations.get(operationId);
  if (known !== undefined) return known;
  const operation: Operation = { abort: new AbortController(), claimed: false, finished: Promise.resolve() };
  binding.operations.set(operationId, operation);
  return operation;
}

/** A path refused is the caller's fault (invalid_argument) or the workspace's state (failed_precondition). */
function connectErrorOf(error: unknown): unknown {
  if (!(error instanceof WorkspacePathError)) return error;
  return new ConnectError(`${error.code}: ${error.message}`, error.code === "invalid_path" ? Code.InvalidArgument : Code.FailedPrecondition);
}

/**
 * Never retryable: that would promise that nothing took effect and that trying again later may
 * succeed, and no failure here promises both.
 */
function failure(code: string, message: string, details: Record<string, string> = {}): Receipt {
  return { receipt: { case: "failure", value: { code, message, retryable: false, details } } };
}

function json(value: Value | undefined): JsonValue {
  return value === undefined ? null : toJson(ValueSchema, value);
}
