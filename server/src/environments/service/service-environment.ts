import { randomUUID } from "node:crypto";
import * as fs from "node:fs/promises";
import * as path from "node:path";
import type { Artifacts } from "../../artifacts/index.ts";
import { describeError, serviceError } from "../../errors/index.ts";
import { authorizeGrant, parseGrants, type GrantAllowLists } from "./grants/index.ts";
import type { Pool, Receipt as PoolReceipt, SecretSource, ServiceGrants } from "../../engine/index.ts";
import { componentRef, SANDBOX_UNAVAILABLE } from "./startup.ts";
import type { BindingContext, EnvironmentKind } from "../kinds.ts";
import { ConfinementError, removeConfined, writeConfined } from "./confined-write.ts";
import { failure, returned, unknown, type AgentLoopHost, type EnvironmentBinding, type ExecuteOperation, type Staging, type TerminalReceipt } from "../port.ts";
import { inReceiptSpan } from "../receipt-span.ts";
import { bindToCurrentContext } from "../../tracing/index.ts";

/**
 * What runs in the service environment: an admitted tool or agent-loop component, or a program
 * on a runtime of the same kind.
 */
export type ServiceImplementation = { tool: string } | { agentloop: string } | { program: { id: string; runtime: string } };

export interface ServiceKindOptions {
  /** Undefined when the service environment does not run on this server (startup.ts): every use is refused. */
  pool: Pool | undefined;
  artifacts: Artifacts;
  allow: GrantAllowLists;
  /** Parent of every retained /workspace (SERVICE_ENV_WORKSPACE_ROOT). */
  workspaceRoot: string;
  /** Where granted secrets are read from at each invocation; the process environment by default. */
  secrets?: SecretSource;
}

/** Failures that mean nothing ran, so a later attempt may succeed. */
const RETRYABLE = new Set(["pool_saturated", "unavailable"]);
/** The trash path's infix (see stage): teardown also removes what a crash left there. */
const REMOVING = ".removing-";

/**
 * The service environment as an adapter of the environment port: bindings run placed tools on
 * the worker pool with the binding's grants. Grants are checked against the deployment
 * allow-lists when a session binds the environment (authorize), never widened afterwards.
 */
export class ServiceEnvironmentKind implements EnvironmentKind<ServiceGrants> {
  readonly #options: ServiceKindOptions;

  constructor(options: ServiceKindOptions) {
    this.#options = options;
  }

  /**
   * Parses the grants (invalid_grant) and refuses any outside the allow-lists (grant_not_allowed);
   * refuses every binding when the service environment does not run here (sandbox_unavailable).
   */
  async authorize(_context: BindingContext, options: unknown): Promise<ServiceGrants> {
    if (!this.#options.pool) throw serviceError("sandbox_unavailable", SANDBOX_UNAVAILABLE);
    const grants = parseGrants((options as { grants?: unknown } | undefined)?.grants);
    await authorizeGrant(grants, this.#options.allow, { workspaceRoot: this.#options.workspaceRoot });
    return grants;
  }

  describe(grants: ServiceGrants): unknown {
    return { grants };
  }

  /** Checks that the workspace admitted what the placement names (not_found otherwise). */
  checkImplementation(context: BindingContext, implementation: unknown): Promise<ServiceImplementation> {
    return this.#check(context, parseImplementation(implementation, "tool"), "tool");
  }

  /** The same for a run's agent loop: an admitted agent loop, or a program on an agent-loop runtime. */
  checkAgentLoop(context: BindingContext, implementation: unknown): Promise<ServiceImplementation> {
    return this.#check(context, parseImplementation(implementation, "agentloop"), "agentloop");
  }

  async #check(context: BindingContext, checked: ServiceImplementation, kind: "tool" | "agentloop"): Promise<ServiceImplementation> {
    const { artifacts } = this.#options;
    if ("program" in checked) {
      await artifacts.get(context.workspace, "program", checked.program.id);
      await artifacts.get(context.workspace, kind, checked.program.runtime);
    } else {
      await artifacts.get(context.workspace, kind, componentOf(checked));
    }
    return checked;
  }

  bind(context: BindingContext, grants: ServiceGrants): EnvironmentBinding {
    const { pool } = this.#options;
    // A session bound before a restart on a host where the sandbox no longer starts.
    if (!pool) return new UnavailableBinding();
    return new ServiceBinding({ ...this.#options, pool }, context, grants);
  }
}

/** Every operation of a binding whose service environment does not run here: refused, nothing sent. */
class UnavailableBinding implements EnvironmentBinding {
  readonly stagesFiles = false;
  async setup() {
    return refusedHere();
  }
  async stage() {
    return refusedHere();
  }
  async execute() {
    return refusedHere();
  }
  async cancel() {
    return refusedHere();
  }
  async detach() {
    return returned("{}");
  }
  async teardown() {
    return returned("{}");
  }
}

function refusedHere(): TerminalReceipt {
  return failure("sandbox_unavailable", SANDBOX_UNAVAILABLE);
}

class ServiceBinding implements EnvironmentBinding {
  readonly #options: ServiceKindOptions & { pool: Pool };
  readonly #context: BindingContext;
  readonly #grants: ServiceGrants;
  readonly #workspaceDir: string;
  /** Executions in flight, by operation id, so that cancel can reach them. */
  readonly #inFlight = new Map<string, AbortController>();

  constructor(options: ServiceKindOptions & { pool: Pool }, context: BindingContext, grants: ServiceGrants) {
    this.#options = options;
    this.#context = context;
    this.#grants = grants;
    this.#workspaceDir = path.join(options.workspaceRoot, context.workspace, context.sessionId, context.environment);
  }

  get stagesFiles(): boolean {
    return this.#grants.filesystem.workspace !== undefined;
  }

  /** Creates the retained /workspace when one is granted. */
  async setup(): Promise<TerminalReceipt> {
    if (this.#grants.filesystem.workspace === undefined) return returned("{}");
    try {
      await fs.mkdir(this.#workspaceDir, { recursive: true, mode: 0o700 });
      return returned("{}");
    } catch (error) {
      return failure("internal", `cannot create the environment's workspace: ${(error as NodeJS.ErrnoException).code ?? "error"}`);
    }
  }

  /**
   * Removes the directories to replace, then writes the files under the retained workspace,
   * host-side (a read-only grant limits the guest, not the service), never through a symlink a
   * guest may have planted. What is removed passes through a trash path beside the workspace
   * (`<environment>.removing-<uuid>`, which no environment name can be), out of guests' reach.
   */
  async stage({ replace, files }: Staging): Promise<TerminalReceipt> {
    if (!this.stagesFiles) return failure("invalid_argument", "this environment has no workspace to stage files into");
    try {
      for (const directory of replace) await removeConfined(this.#workspaceDir, directory, `${this.#workspaceDir}${REMOVING}${randomUUID()}`);
      for (const file of files) await writeConfined(this.#workspaceDir, file.path, file.bytes);
      return returned(JSON.stringify({ staged: files.length }));
    } catch (error) {
      if (error instanceof ConfinementError) return failure("invalid_argument", `cannot stage ${error.message}`);
      return failure("internal", `cannot stage files into the workspace: ${(error as NodeJS.ErrnoException).code ?? "error"}`);
    } finally {
      // Its disk use changed outside any invocation: measured again before the next counts against its quota.
      this.#options.pool.workspaceChanged(this.#workspaceDir);
    }
  }

  async execute(operation: ExecuteOperation): Promise<TerminalReceipt> {
    const implementation = operation.implementation as ServiceImplementation;
    let program: { source: string } | undefined;
    try {
      if ("program" in implementation) program = { source: await this.#options.artifacts.source(this.#context.workspace, implementation.program.id) };
    } catch (error) {
      return asFailure(error);
    }
    const controller = new AbortController();
    this.#inFlight.set(operation.operationId, controller);
    const attributes = {
      "skillenv.operation.id": operation.operationId,
      "skillenv.pool.kind": program ? "program" : operation.loopHost ? "agent_loop" : "tool",
    };
    const receipt = await inReceiptSpan("pool invoke", attributes, async () =>
      fromPool(
        await this.#options.pool.invoke({
          signal: controller.signal,
          tenant: this.#context.workspace,
          component: componentRef(this.#options.artifacts, componentOf(implementation)),
          entrypoint: operation.loopHost ? "turn" : "run",
          input: operation.input,
          configuration: operation.configuration,
          deadlineMs: operation.deadlineMs,
          grants: this.#grants,
          workspaceDir: this.#workspaceDir,
          // Read by the pool at dispatch, so a secret set or changed later applies to the next call.
          secretSource: this.#options.secrets ?? process.env,
          ...(program ? { program } : {}),
          ...(operation.loopHost ? { host: inThisContext(operation.loopHost) } : {}),
        }),
      ),
    );
    this.#inFlight.delete(operation.operationId);
    return receipt;
  }

  /**
   * Stops the invocation if its guest is waiting (on the host, a timer, I/O) or has not started;
   * a guest computing on its worker thread runs on to its end or its deadline (docs/environments.md).
   */
  async cancel(operationId: string): Promise<TerminalReceipt> {
    const controller = this.#inFlight.get(operationId);
    if (!controller) return failure("not_in_flight", "the operation is not running in this environment");
    controller.abort();
    return returned("{}");
  }

  async detach(): Promise<TerminalReceipt> {
    return returned("{}");
  }

  /**
   * Removes the retained workspace, and the session's directory above it once no environment of
   * the session has anything left there (the session's teardowns run one after another, so the
   * last one removes it). The workspace's own directory stays: other sessions share it.
   */
  async teardown(): Promise<TerminalReceipt> {
    this.#options.pool.workspaceChanged(this.#workspaceDir);
    try {
      await fs.rm(this.#workspaceDir, { recursive: true, force: true, maxRetries: 3 });
      // What a crash between a stage's rename and its removal left beside the workspace.
      const parent = path.dirname(this.#workspaceDir);
      const leftover = `${path.basename(this.#workspaceDir)}${REMOVING}`;
      const entries = await fs.readdir(parent).catch(() => []);
      for (const entry of entries.filter((name) => name.startsWith(leftover)))
        await fs.rm(path.join(parent, entry), { recursive: true, force: true, maxRetries: 3 });
      // rmdir removes only an empty directory: another environment's workspace keeps it (ENOTEMPTY).
      await fs.rmdir(parent).catch(() => undefined);
      return returned("{}");
    } catch (error) {
      return failure("internal", `cannot remove the environment's workspace: ${(error as NodeJS.ErrnoException).code ?? "error"}`);
    }
  }
}

function fromPool(receipt: PoolReceipt): TerminalReceipt {
  switch (receipt.outcome) {
    case "returned":
      return returned(receipt.output);
    case "failure":
      return failure(receipt.code, receipt.message, RETRYABLE.has(receipt.code));
    case "unknown":
      return unknown(receipt.message);
  }
}

/**
 * The agent loop's host services, each call run in the context of the operation that invoked
 * the loop: they arrive as a worker process's messages, in whatever context its channel was
 * opened in, and the turn's model and tool calls must be spans of the run's own trace.
 */
function inThisContext(host: AgentLoopHost): AgentLoopHost {
  const dropped = host.dropped;
  return {
    callModel: bindToCurrentContext((request: string) => host.callModel(request)),
    dispatchTools: bindToCurrentContext((calls: string) => host.dispatchTools(calls)),
    emit: bindToCurrentContext((event: string) => host.emit(event)),
    ...(dropped ? { dropped: bindToCurrentContext((count: number) => dropped.call(host, count)) } : {}),
  };
}

/** A refusal before dispatch (a program no longer readable): nothing ran. */
function asFailure(error: unknown): TerminalReceipt {
  const { body } = describeError(error);
  return failure(body.code, body.message);
}

/** The component that runs: the tool or agent loop itself, or the program's runtime. */
function componentOf(implementation: ServiceImplementation): string {
  if ("program" in implementation) return implementation.program.runtime;
  return "tool" in implementation ? implementation.tool : implementation.agentloop;
}

function parseImplementation(value: unknown, kind: "tool" | "agentloop"): ServiceImplementation {
  const implementation = value as Partial<Record<"tool" | "agentloop" | "program", unknown>> | undefined;
  if (kind === "tool" && typeof implementation?.tool === "string") return { tool: implementation.tool };
  if (kind === "agentloop" && typeof implementation?.agentloop === "string") return { agentloop: implementation.agentloop };
  const program = implementation?.program as { id?: unknown; runtime?: unknown } | undefined;
  if (typeof program?.id === "string" && typeof program.runtime === "string") return { program: { id: program.id, runtime: program.runtime } };
  const what = kind === "tool" ? "a tool in the service environment needs an admitted tool id" : "an agent loop needs an admitted agent-loop id";
  throw serviceError("invalid_argument", `${what}, or a program {id, runtime}`);
}
