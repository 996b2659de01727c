import type { JsonValue } from "@bufbuild/protobuf";
import { serviceError } from "../../errors/index.ts";
import type { BindingContext, EnvironmentKind } from "../kinds.ts";
import { failure, returned, type EnvironmentBinding, type ExecuteOperation, type TerminalReceipt } from "../port.ts";
import { inReceiptSpan } from "../receipt-span.ts";
import type { HostHub } from "./hub.ts";

/**
 * The host environment (SPEC 1.4): tools served by the caller's own process over the host
 * command stream. A binding needs no options; its tools' implementations are opaque to the
 * service and handed to the host with each command.
 */
export class HostEnvironmentKind implements EnvironmentKind<Record<string, never>> {
  readonly #hub: HostHub;

  constructor(hub: HostHub) {
    this.#hub = hub;
  }

  async authorize(): Promise<Record<string, never>> {
    return {};
  }

  describe(): unknown {
    return {};
  }

  describeLive(context: BindingContext): Record<string, unknown> {
    return { attached: this.#hub.connectionFor(context) !== undefined };
  }

  /** `{"opaque": <any JSON>}` or nothing: the host gets the value with each command, or the tool's name alone. */
  async checkImplementation(_context: BindingContext, implementation: unknown): Promise<unknown> {
    if (implementation !== undefined && !isOpaque(implementation)) {
      throw serviceError("invalid_argument", "a tool in a host environment takes an opaque implementation (any JSON) or none");
    }
    return implementation;
  }

  bind(context: BindingContext): EnvironmentBinding {
    return new HostBinding(this.#hub, context);
  }
}

class HostBinding implements EnvironmentBinding {
  readonly stagesFiles = false;
  readonly #hub: HostHub;
  readonly #key: BindingContext;

  constructor(hub: HostHub, key: BindingContext) {
    this.#hub = hub;
    this.#key = key;
  }

  /** Nothing to prepare: a host attaches whenever its process is ready. */
  async setup(): Promise<TerminalReceipt> {
    return returned("{}");
  }

  async stage(): Promise<TerminalReceipt> {
    return failure("invalid_argument", "a host environment has no workspace the service can stage files into");
  }

  /** Sent on the binding's open connection; without one, nothing is sent (host_unavailable). */
  execute(operation: ExecuteOperation): Promise<TerminalReceipt> {
    const connection = this.#hub.connectionFor(this.#key);
    if (!connection)
      return Promise.resolve(failure("host_unavailable", `no host is connected for environment ${this.#key.environment}; nothing was sent`, true));
    return inReceiptSpan("host command", { "skillenv.operation.id": operation.operationId, "gen_ai.tool.name": operation.tool }, () =>
      connection.dispatch({ ...operation, implementation: (operation.implementation as { opaque?: JsonValue } | undefined)?.opaque }),
    );
  }

  async cancel(operationId: string): Promise<TerminalReceipt> {
    const sent = this.#hub.connectionFor(this.#key)?.cancel(operationId) ?? false;
    return sent ? returned("{}") : failure("not_in_flight", "the operation is not in flight on a connected host");
  }

  async detach(): Promise<TerminalReceipt> {
    this.#hub.closeBinding(this.#key, "session_ended");
    return returned("{}");
  }

  async teardown(): Promise<TerminalReceipt> {
    this.#hub.closeBinding(this.#key, "session_deleted");
    return returned("{}");
  }
}

function isOpaque(implementation: unknown): boolean {
  return typeof implementation === "object" && implementation !== null && Object.keys(implementation).length === 1 && "opaque" in implementation;
}
