import { create, fromJson, toJson, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { ConnectRequestSchema, HostService, type Command, type HostReceiptSchema, type ServerMessage } from "../../../gen/skillenv/env/v1/host_pb.js";
import { Channel } from "../../src/environments/host/channel.ts";

export type HostClient = Client<typeof HostService>;

export function hostClient(baseUrl: string, key: string, protocol: "connect" | "grpc" = "connect"): HostClient {
  const options = { baseUrl, interceptors: [(next: any) => (request: any) => (request.header.set("authorization", `Bearer ${key}`), next(request))] };
  const transport = protocol === "grpc" ? createGrpcTransport(options) : createConnectTransport({ ...options, httpVersion: "2" });
  return createClient(HostService, transport);
}

type ReceiptInit = MessageInitShape<typeof ConnectRequestSchema>;
type HostReceiptInit = MessageInitShape<typeof HostReceiptSchema>["receipt"];

/** What the server sent a test host, in order, and waits for what it has yet to send. */
abstract class RecordingHost {
  readonly messages: ServerMessage[] = [];
  readonly #waiters: Array<() => void> = [];
  protected readonly abort = new AbortController();
  /** Settles when the server's stream ends (with the error it ended with, if any). */
  abstract readonly done: Promise<unknown>;

  protected record(message: ServerMessage): void {
    this.messages.push(message);
    for (const wake of this.#waiters.splice(0)) wake();
  }

  get commands(): Command[] {
    return this.messages.flatMap((message) => (message.message.case === "command" ? [message.message.value] : []));
  }

  /** Resolves with the first recorded message matching `check`, waiting for it. */
  async next<T>(check: (message: ServerMessage) => T | undefined, what = "a message"): Promise<T> {
    for (let i = 0; i < 1000; i++) {
      for (const message of this.messages) {
        const found = check(message);
        if (found !== undefined) return found;
      }
      await Promise.race([new Promise<void>((resolve) => this.#waiters.push(resolve)), this.done, new Promise((resolve) => setTimeout(resolve, 50))]);
    }
    throw new Error(`the host never received ${what}`);
  }

  attached(): Promise<string> {
    return this.next((message) => (message.message.case === "attached" ? message.message.value.connectionId : undefined), "attached");
  }

  command(tool: string, nth = 0): Promise<Command> {
    return this.next(() => this.commands.filter((command) => command.tool === tool)[nth], `command ${nth} of ${tool}`);
  }

  /** Resolves once the server has asked to cancel `operationId`. */
  cancelled(operationId: string): Promise<true> {
    return this.next(
      (message) => (message.message.case === "cancel" && message.message.value.operationId === operationId ? true : undefined),
      `a cancel of ${operationId}`,
    );
  }

  /** The reason of the server's `closing` message, once it came. */
  closing(): Promise<string> {
    return this.next((message) => (message.message.case === "closing" ? message.message.value.reason : undefined), "closing");
  }

  /** Drops the connection (as a crashed host or a network cut would). */
  drop(): void {
    this.abort.abort();
  }
}

/**
 * A test host over the bidirectional stream: records every server message, and lets the test
 * answer commands by hand (`returned`, `failure`, `progress`, raw `send`).
 */
export class TestHost extends RecordingHost {
  /** The host's side of the stream: what the test sends. */
  readonly #outbox = new Channel<ReceiptInit>(Number.POSITIVE_INFINITY);
  /** While set, the host stops reading its stream (as a stuck host would). */
  #paused: Promise<void> | undefined;
  readonly done: Promise<unknown>;

  constructor(client: HostClient, sessionId: string, environment: string) {
    super();
    this.#outbox.push({ message: { case: "attach", value: { sessionId, environment } } });
    this.done = (async () => {
      for await (const response of client.connect(this.#outbox, { signal: this.abort.signal })) {
        this.record(response.message!);
        await this.#paused;
      }
    })().catch((error: unknown) => error);
  }

  send(message: ReceiptInit): void {
    this.#outbox.push(message);
  }

  returned(operationId: string, output: JsonValue): void {
    this.send({ message: { case: "receipt", value: { operationId, receipt: { case: "returned", value: { output: fromJson(ValueSchema, output) } } } } });
  }

  progress(operationId: string, message: string): void {
    this.send({ message: { case: "receipt", value: { operationId, receipt: { case: "progress", value: { message } } } } });
  }

  accepted(operationId: string): void {
    this.send({ message: { case: "receipt", value: { operationId, receipt: { case: "accepted", value: {} } } } });
  }

  /** Stops reading after the next message, for good. */
  stopReading(): void {
    this.#paused = new Promise(() => undefined);
  }

  /** Ends the host's side of the stream cleanly. */
  close(): void {
    this.#outbox.close();
  }
}

/**
 * A test host in the browser form: it reads the server-streaming Commands and answers each
 * command with a unary Report on its connection.
 */
export class TestBrowserHost extends RecordingHost {
  readonly done: Promise<unknown>;
  readonly #client: HostClient;

  constructor(client: HostClient, sessionId: string, environment: string) {
    super();
    this.#client = client;
    this.done = (async () => {
      for await (const response of client.commands({ attach: { sessionId, environment } }, { signal: this.abort.signal })) this.record(response.message!);
    })().catch((error: unknown) => error);
  }

  async report(operationId: string, receipt: HostReceiptInit): Promise<void> {
    await this.#client.report({ connectionId: await this.attached(), receipt: { operationId, receipt } });
  }

  returned(operationId: string, output: JsonValue): Promise<void> {
    return this.report(operationId, { case: "returned", value: { output: fromJson(ValueSchema, output) } });
  }
}

/** A command's input as plain JSON. */
export function inputOf(command: Command): JsonValue {
  return command.input ? toJson(ValueSchema, command.input) : null;
}

export const emptyRequest = () => create(ConnectRequestSchema);
