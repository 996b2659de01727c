import { ConnectError } from "@connectrpc/connect";
import type { Command } from "../../gen/skillenv/env/v1/host_pb.js";
import { serviceErrorCode } from "../service-error.ts";
import { reconnectDelay, sleep, type ReconnectOptions } from "./backoff.ts";
import { openCommandStream, type CommandStream, type HostRpc } from "./command-stream.ts";
import { runCommand } from "./commands.ts";
import { handlerOf, type HostEnvironmentDefinition } from "./host-env.ts";
import type { HostStreaming } from "./streaming.ts";
import type { RunningToolServer } from "./tool-server.ts";

/** "connecting": opening the command stream, or waiting to open it again; "connected": attached and serving; "closed": for good. */
export type HostState = "connecting" | "connected" | "closed";

/** What serving needs from the client: the HostService and how to reach it. */
export interface HostDeps {
  rpc: HostRpc;
  streaming: HostStreaming;
  reconnect: Required<ReconnectOptions>;
}

/**
 * Refusals that say "not now" rather than "never": the host tries again. Any other refusal with
 * a code (the session ended or was deleted, no such host environment, a bad key) closes it.
 * Failures without a code never reached the service's answer (a refused or reset connection),
 * and are tried again too.
 */
const TRY_AGAIN: ReadonlySet<string> = new Set(["unavailable", "server_busy", "storage_unavailable", "internal"]);

/**
 * `closing` codes after which coming back is pointless or harmful: the session is over, or a
 * newer host took the binding over (coming back would take it back, and two hosts would keep
 * replacing each other). Any other close (the server restarting, a stream cut) is reconnected.
 */
const FINAL_CLOSES: ReadonlySet<string> = new Set(["replaced", "session_ended", "session_deleted"]);

/** The service closed the command stream for good; `code` is its `closing` code (e.g. "session_ended"). */
export class HostClosedError extends Error {
  override name = "HostClosedError";
  readonly code: string;
  constructor(code: string, reason: string) {
    super(`the service ended the command stream: ${reason} (${code})`);
    this.code = code;
  }
}

/** The tool server a host serves by ended; the host closes with it. */
export class ToolServerExitedError extends Error {
  override name = "ToolServerExitedError";
}

/** How one stream ended: whether to open another, and why it ended. */
type StreamEnd = { reconnect: boolean; error: Error | undefined };

/**
 * A host serving one session's host environment: it holds the command stream open, runs each
 * command's handler (concurrently), and opens the stream again with backoff whenever it drops,
 * until `stop()` or a refusal that says the binding cannot be served. The service never sends
 * an old command again after a reconnect; commands in flight when a stream drops are aborted.
 *
 * A definition with a tool server (an MCP server over stdio) is served by a started program: the
 * one handed over (the client started it to list its tools when it created the session), or one
 * started here. It lives across reconnects, is closed when the host closes, and closes the host
 * when it ends by itself.
 */
export class HostConnection {
  readonly sessionId: string;
  readonly definition: HostEnvironmentDefinition;
  readonly #deps: HostDeps;
  readonly #stop = new AbortController();
  readonly #listeners = new Set<(state: HostState) => void>();
  readonly #done: Promise<void>;
  #state: HostState = "connecting";
  #error: Error | undefined;
  /** Why the host closed other than by `stop()`: its tool server ended. */
  #halted: Error | undefined;
  #server: RunningToolServer | undefined;

  constructor(deps: HostDeps, sessionId: string, definition: HostEnvironmentDefinition, started?: RunningToolServer) {
    this.sessionId = sessionId;
    this.definition = definition;
    this.#deps = deps;
    this.#server = started;
    this.#done = this.#serve();
  }

  get environment(): string {
    return this.definition.name;
  }

  get state(): HostState {
    return this.#state;
  }

  /** Why the last stream ended (while reconnecting), or why the host closed; undefined after `stop()`. */
  get error(): Error | undefined {
    return this.#error;
  }

  /** Calls `listener` on every change of state; returns the function that unsubscribes it. */
  onStateChange(listener: (state: HostState) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Resolves once the host is attached and serving; rejects if it closes first. */
  connected(): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = (state: HostState) => {
        if (state === "connecting") return;
        unsubscribe();
        if (state === "connected") resolve();
        else reject(this.#error ?? new Error(`the host of environment ${this.environment} was stopped`));
      };
      const unsubscribe = this.onStateChange(check);
      check(this.#state);
    });
  }

  /**
   * Closes the command stream for good and aborts the handlers in flight (the service ends their
   * operations unknown). Resolves once the stream is closed; handlers that ignore their signal
   * are not waited for.
   */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#done;
  }

  async #serve(): Promise<void> {
    try {
      if (this.definition.server && !this.#server) this.#server = await this.definition.server.start(this.environment);
    } catch (error) {
      this.#error = error instanceof Error ? error : new Error(String(error));
      this.#setState("closed");
      return;
    }
    void this.#server?.exited.then((why) => {
      if (!why) return;
      this.#halted = new ToolServerExitedError(`${this.definition.server?.description ?? "the tool server"} ended: ${why.message}`, { cause: why });
      this.#stop.abort();
    });
    try {
      await this.#serveStreams();
    } finally {
      // Before "closed": whoever waits for the host to close finds its server's program ended.
      await this.#server?.close();
    }
    this.#setState("closed");
  }

  async #serveStreams(): Promise<void> {
    let attempt = 0;
    const attached = () => {
      attempt = 0;
      this.#error = undefined;
      this.#setState("connected");
    };
    while (!this.#stop.signal.aborted) {
      const end = await this.#serveStream(attached);
      this.#error = end.error;
      if (!end.reconnect || this.#stop.signal.aborted) break;
      this.#setState("connecting");
      await sleep(reconnectDelay(attempt++, this.#deps.reconnect), this.#stop.signal);
    }
    // Stopped by the caller: what ended the last stream was the stop, not a failure.
    if (this.#stop.signal.aborted) this.#error = this.#halted;
  }

  /** One command stream, from opening it to its end. */
  async #serveStream(attached: () => void): Promise<StreamEnd> {
    const streamEnded = new AbortController();
    const signal = AbortSignal.any([this.#stop.signal, streamEnded.signal]);
    const inFlight = new Map<string, AbortController>();
    let closing = { reason: "", code: "" };
    try {
      const stream = openCommandStream(this.#deps.rpc, this.#deps.streaming, { sessionId: this.sessionId, environment: this.environment }, signal);
      for await (const { message } of stream.messages) {
        if (message.case === "attached") attached();
        else if (message.case === "command") this.#run(message.value, stream, inFlight);
        else if (message.case === "cancel")
          inFlight.get(message.value.operationId)?.abort(new DOMException("the service cancelled the operation", "AbortError"));
        else if (message.case === "closing") closing = message.value;
        // "refused": a late receipt the service no longer waited for; nothing to do.
      }
      return { reconnect: !FINAL_CLOSES.has(closing.code), error: new HostClosedError(closing.code || "stream_ended", closing.reason || "no reason given") };
    } catch (thrown) {
      const error = ConnectError.from(thrown);
      const code = serviceErrorCode(error);
      return { reconnect: code === undefined || TRY_AGAIN.has(code), error };
    } finally {
      streamEnded.abort();
      for (const operation of inFlight.values()) operation.abort(new DOMException("the command stream closed", "AbortError"));
    }
  }

  /** Runs the command's handler without waiting for it: commands run concurrently. */
  #run(command: Command, stream: CommandStream, inFlight: Map<string, AbortController>): void {
    const operation = new AbortController();
    inFlight.set(command.operationId, operation);
    const server = this.#server;
    const handler = server ? server.call : handlerOf(this.definition, command.tool);
    const served = server ? server.tools.map((tool) => tool.name) : Object.keys(this.definition.tools);
    void runCommand(command, handler, served, operation.signal, stream.send).finally(() => inFlight.delete(command.operationId));
  }

  #setState(state: HostState): void {
    if (state === this.#state) return;
    this.#state = state;
    for (const listener of [...this.#listeners]) listener(state);
  }
}
