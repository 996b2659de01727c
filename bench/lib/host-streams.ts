// Both ends of a host command stream as the hosts suite drives them, each over connect-node's
// bidirectional Connect RPC (HostService.Connect) on a transport of its own:
//   - attachInstantHost: a host that answers every command at once with `returned {output:
//     input}` and nothing else (no accepted, no progress): the least a host can send;
//   - EchoStream: the client of the bare echo stream (servers/service-beside-echo-stream.ts), one
//     receipt out and one command back per call, matched by operation id, any number in flight.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Value } from "@bufbuild/protobuf/wkt";
import type { Client } from "@connectrpc/connect";
import { Outbox } from "../../clients/ts/src/hosts/outbox.ts";
import type { ConnectRequestSchema, HostService } from "../../gen/skillenv/env/v1/host_pb.js";

export type HostRpc = Client<typeof HostService>;
type Request = MessageInitShape<typeof ConnectRequestSchema>;

function returnedReceipt(operationId: string, output: Value | undefined): Request {
  return { message: { case: "receipt", value: { operationId, receipt: { case: "returned", value: { output } } } } };
}

/**
 * Attaches a host that echoes every command's input as its output, for the session's host
 * environment `environment`; resolves once the service says `attached`. Anything else the
 * service sends (a cancel, a refused receipt, closing) is a failure of the run: the host says
 * so on stderr and drops its stream, so that the commands in flight end `unknown` and the
 * checked CallTools fail instead of waiting for their deadline.
 */
export async function attachInstantHost(rpc: HostRpc, sessionId: string, environment: string): Promise<{ close(): void }> {
  const outbox = new Outbox<Request>();
  const abort = new AbortController();
  const attached = Promise.withResolvers<void>();
  outbox.push({ message: { case: "attach", value: { sessionId, environment } } });
  void (async () => {
    for await (const { message } of rpc.connect(outbox, { signal: abort.signal })) {
      const { case: kind, value } = message!.message;
      if (kind === "attached") attached.resolve();
      else if (kind === "command") outbox.push(returnedReceipt(value.operationId, value.input));
      else throw new Error(`the instant host got ${kind} ${JSON.stringify(value)}`);
    }
    throw new Error("the service ended the instant host's stream");
  })().catch((error: unknown) => {
    if (abort.signal.aborted) return;
    abort.abort();
    attached.reject(error);
    process.stderr.write(`  instant host of ${sessionId}/${environment}: ${error instanceof Error ? error.message : String(error)}\n`);
  });
  await attached.promise;
  return {
    close() {
      abort.abort();
      outbox.close();
    },
  };
}

/** The client side of the bare echo stream: `send` resolves with the payload echoed back. */
export class EchoStream {
  readonly #outbox = new Outbox<Request>();
  readonly #abort = new AbortController();
  readonly #waiting = new Map<string, PromiseWithResolvers<Value | undefined>>();
  #sent = 0;
  #broken: Error | undefined;

  constructor(rpc: HostRpc) {
    void this.#read(rpc);
  }

  /** Sends `output` in a `returned` receipt; resolves with the input of the command that answers it. */
  send(output: Value): Promise<Value | undefined> {
    if (this.#broken) return Promise.reject(this.#broken);
    // As long as the service's operation ids (newId), without their cost.
    const operationId = `op_${String(this.#sent++).padStart(26, "0")}`;
    const answer = Promise.withResolvers<Value | undefined>();
    this.#waiting.set(operationId, answer);
    this.#outbox.push(returnedReceipt(operationId, output));
    return answer.promise;
  }

  close(): void {
    this.#abort.abort();
    this.#outbox.close();
  }

  async #read(rpc: HostRpc): Promise<void> {
    try {
      for await (const { message } of rpc.connect(this.#outbox, { signal: this.#abort.signal })) {
        const command = message?.message.case === "command" ? message.message.value : undefined;
        const answer = command && this.#waiting.get(command.operationId);
        if (!command || !answer) throw new Error(`the echo stream answered something unasked: ${message?.message.case} ${command?.operationId ?? ""}`);
        this.#waiting.delete(command.operationId);
        answer.resolve(command.input);
      }
      throw new Error("the stream ended");
    } catch (error) {
      this.#broken = new Error(`echo stream: ${error instanceof Error ? error.message : String(error)}`);
      for (const answer of this.#waiting.values()) answer.reject(this.#broken);
      this.#waiting.clear();
    }
  }
}
