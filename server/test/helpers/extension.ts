import * as http from "node:http";
import type { Socket } from "node:net";
import { fromJson, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { ConnectError, Code, type ConnectRouter, type HandlerContext } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { ExtensionEnvironmentService, type ExecuteRequest, type ExecuteResponseSchema } from "../../../gen/skillenv/extension/v1/extension_pb.js";

export { freePort } from "./ports.ts";

/** What the test extension was asked, in order. */
export interface ExtensionCall {
  method: string;
  authorization: string | undefined;
  /** The W3C trace context header the call came with, if any. */
  traceparent: string | undefined;
  request: unknown;
}

/**
 * A small extension environment on loopback for the service's adapter tests. Tools behave by
 * name: `echo` returns its input after accepted and progress; `hang` never answers until
 * cancelled; `drop` says accepted, then the connection is cut; `refuse` answers a Connect error.
 * `leak` echoes the bearer credential in a progress message and in its failure's code, message
 * and details, `whoami` returns it; with `leakOnStage` set, Stage refuses with it in the message.
 * `garbage()` makes the next request get a body that is not the protocol.
 */
export class TestExtension {
  readonly calls: ExtensionCall[] = [];
  url = "";
  #server: http.Server | undefined;
  #garbageNext = false;
  /** Stage answers failed_precondition quoting the caller's credential. */
  leakOnStage = false;
  #socket: Socket | undefined;
  /** Each is told of every call recorded from now on; true when it is done waiting. */
  readonly #waiters = new Set<(call: ExtensionCall) => boolean>();

  /** Listens on `port` of loopback (default: a free one). */
  async start(port = 0): Promise<this> {
    const adapter = connectNodeAdapter({ routes: (router) => this.#routes(router) });
    this.#server = http.createServer((req, res) => {
      this.#socket = req.socket;
      if (this.#garbageNext) {
        this.#garbageNext = false;
        res.writeHead(200, { "content-type": "application/connect+proto" });
        res.end("this is not the protocol");
        return;
      }
      adapter(req, res);
    });
    await new Promise<void>((resolve) => this.#server!.listen(port, "127.0.0.1", () => resolve()));
    this.url = `http://127.0.0.1:${(this.#server.address() as { port: number }).port}`;
    return this;
  }

  garbage(): void {
    this.#garbageNext = true;
  }

  /** Resolves with the first call of `method` (recorded already or later) whose request `matches`. */
  called(method: string, matches: (request: any) => boolean = () => true): Promise<ExtensionCall> {
    const found = this.calls.find((call) => call.method === method && matches(call.request));
    if (found) return Promise.resolve(found);
    return new Promise((resolve) => this.#waiters.add((call) => (call.method === method && matches(call.request) ? (resolve(call), true) : false)));
  }

  methods(): string[] {
    return this.calls.map((call) => call.method);
  }

  async close(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise((resolve) => this.#server?.close(resolve));
  }

  #record(method: string, request: unknown, context: HandlerContext): void {
    const header = (name: string) => context.requestHeader.get(name) ?? undefined;
    const call = { method, authorization: header("authorization"), traceparent: header("traceparent"), request };
    this.calls.push(call);
    for (const waiter of this.#waiters) if (waiter(call)) this.#waiters.delete(waiter);
  }

  #routes(router: ConnectRouter): void {
    const empty = (method: string) => async (request: unknown, context: HandlerContext) => (this.#record(method, request, context), {});
    router.service(ExtensionEnvironmentService, {
      setup: empty("setup"),
      stage: async (request, context) => {
        this.#record("stage", request, context);
        if (this.leakOnStage) throw new ConnectError(`no room to stage for ${credentialOf(context)}`, Code.FailedPrecondition);
        return {};
      },
      detach: empty("detach"),
      teardown: empty("teardown"),
      cancel: async (request, context) => {
        this.#record("cancel", request, context);
        return {};
      },
      execute: (request, context) => this.#execute(request, context),
    });
  }

  async *#execute(request: ExecuteRequest, context: HandlerContext): AsyncGenerator<MessageInitShape<typeof ExecuteResponseSchema>> {
    this.#record("execute", request, context);
    if (request.tool === "refuse") throw new ConnectError("this extension does not serve you", Code.PermissionDenied);
    yield { receipt: { case: "accepted" as const, value: {} } };
    if (request.tool === "leak") {
      const credential = credentialOf(context);
      yield { receipt: { case: "progress" as const, value: { message: `working for ${credential}` } } };
      yield {
        receipt: {
          case: "failure" as const,
          value: { code: `bad_${credential}`, message: `refused for ${credential}`, details: { token: credential, [credential]: "a key" } },
        },
      };
      return;
    }
    if (request.tool === "whoami") {
      yield { receipt: { case: "returned" as const, value: { output: fromJson(ValueSchema, { credential: credentialOf(context) }) } } };
      return;
    }
    if (request.tool === "drop") {
      await new Promise((resolve) => setTimeout(resolve, 20));
      this.#socket?.destroy();
      return;
    }
    if (request.tool === "hang") {
      await new Promise((resolve) => context.signal.addEventListener("abort", resolve, { once: true }));
      return;
    }
    yield { receipt: { case: "progress" as const, value: { message: "working" } } };
    yield { receipt: { case: "returned" as const, value: { output: request.input } } };
  }
}

function credentialOf(context: HandlerContext): string {
  return (context.requestHeader.get("authorization") ?? "").replace(/^Bearer /, "");
}

export function jsonOf(value: Parameters<typeof toJson<typeof ValueSchema>>[1] | undefined): unknown {
  return value ? toJson(ValueSchema, value) : undefined;
}
