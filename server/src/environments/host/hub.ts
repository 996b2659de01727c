import type { ServerMessage } from "../../../../gen/skillenv/env/v1/host_pb.js";
import { Channel } from "./channel.ts";
import { HostConnection, type CloseCode, type ConnectionLimits, type HostBindingKey } from "./connection.ts";

/**
 * The open host connections, one per (workspace, session, environment). A newer connection for a
 * binding replaces the older one (a host that restarted, or reconnected after a network cut,
 * takes over at once); the older one is closed and its commands in flight end unknown.
 */
export class HostHub {
  readonly #limits: ConnectionLimits;
  readonly #byBinding = new Map<string, HostConnection>();
  readonly #byId = new Map<string, { connection: HostConnection; outgoing: Channel<ServerMessage> }>();

  /** Host connections attached now (the metrics). */
  get attached(): number {
    return this.#byBinding.size;
  }

  constructor(limits: ConnectionLimits) {
    this.#limits = limits;
  }

  /** Opens a connection for the binding, replacing any other; read its messages from `outgoing`. */
  attach(key: HostBindingKey): { connection: HostConnection; outgoing: Channel<ServerMessage> } {
    const outgoing = new Channel<ServerMessage>(this.#limits.maxQueued);
    const connection = new HostConnection(key, outgoing, this.#limits);
    this.#byBinding.get(bindingKey(key))?.close("replaced");
    this.#byBinding.set(bindingKey(key), connection);
    this.#byId.set(connection.id, { connection, outgoing });
    return { connection, outgoing };
  }

  /** The binding's open connection, if a host is attached. */
  connectionFor(key: HostBindingKey): HostConnection | undefined {
    const connection = this.#byBinding.get(bindingKey(key));
    return connection?.closed ? undefined : connection;
  }

  byId(id: string): HostConnection | undefined {
    return this.#byId.get(id)?.connection;
  }

  /** Closes the connection and forgets it (its stream ended). */
  release(connection: HostConnection, code: CloseCode): void {
    connection.close(code);
    this.#byId.delete(connection.id);
    if (this.#byBinding.get(bindingKey(connection.key)) === connection) this.#byBinding.delete(bindingKey(connection.key));
  }

  /** Closes whatever serves the binding (the session ended or was deleted). */
  closeBinding(key: HostBindingKey, code: CloseCode): void {
    const connection = this.#byBinding.get(bindingKey(key));
    if (connection) this.release(connection, code);
  }

  closeAll(code: CloseCode): void {
    for (const { connection } of [...this.#byId.values()]) this.release(connection, code);
  }
}

function bindingKey({ workspace, sessionId, environment }: HostBindingKey): string {
  return `${workspace}/${sessionId}/${environment}`;
}
