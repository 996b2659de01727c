import { fromJson, toJsonString, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromMs, ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { ExtensionEnvironmentService, type ExecuteResponse } from "../../../../gen/skillenv/extension/v1/extension_pb.js";
import { serviceError } from "../../errors/index.ts";
import { originAllowed } from "../../config/index.ts";
import type { BindingContext, EnvironmentKind } from "../kinds.ts";
import { deadlineSignal, isNotSentCode } from "../outgoing.ts";
import { redactingBinding } from "../redacting-binding.ts";
import { failure, returned, unknown, type EnvironmentBinding, type ExecuteOperation, type Staging, type TerminalReceipt } from "../port.ts";
import { CredentialUnreadable, readableCredential, unsealCredential, type Sealer } from "./sealer.ts";
import { TracedCalls } from "./traced-calls.ts";

/** An extension binding as a session stores it: the credential only sealed. */
export interface ExtensionOptions {
  url: string;
  sealedCredential?: string;
  /** JSON text carried to Setup unread. */
  configuration: string;
}

export interface ExtensionKindOptions {
  sealer: Sealer;
  /** SERVICE_ENV_NETWORK_ALLOW: an extension's URL must be within it. */
  networkAllow: readonly string[];
}

/**
 * How long after an execute's deadline the service still waits for the extension's own receipt:
 * an extension enforcing the deadline itself answers `timeout` with what it has (partial output),
 * which a service-side timer firing at the same instant would lose.
 */
export const EXTENSION_DEADLINE_GRACE_MS = 1000;

/**
 * Extension environments (SPEC 1.5, 2.6): bindings reached over HTTP with the Connect protocol
 * of skillenv.extension.v1. The URL must be within the network allow-list; the optional
 * credential is sealed at rest and sent only as a bearer token to the extension.
 */
export class ExtensionEnvironmentKind implements EnvironmentKind<ExtensionOptions> {
  readonly #options: ExtensionKindOptions;

  constructor(options: ExtensionKindOptions) {
    this.#options = options;
  }

  async authorize(_context: BindingContext, options: unknown): Promise<ExtensionOptions> {
    const { url, credential, configuration } = (options ?? {}) as { url?: string; credential?: string; configuration?: JsonValue };
    if (typeof url !== "string" || !/^https?:\/\//.test(url)) throw serviceError("invalid_argument", "an extension environment needs an http(s) url");
    if (!originAllowed(this.#options.networkAllow, url)) {
      throw serviceError("grant_not_allowed", `extension url ${new URL(url).origin} is not within the network allow-list (SERVICE_ENV_NETWORK_ALLOW)`);
    }
    return {
      url: url.replace(/\/+$/, ""),
      ...(credential ? { sealedCredential: this.#options.sealer.seal(credential) } : {}),
      configuration: JSON.stringify(configuration ?? null),
    };
  }

  describe(options: ExtensionOptions): unknown {
    return { url: options.url, configuration: JSON.parse(options.configuration) as JsonValue };
  }

  /** `{"opaque": <any JSON>}` or nothing, carried to Execute as the implementation. */
  async checkImplementation(_context: BindingContext, implementation: unknown): Promise<unknown> {
    const opaque =
      implementation === undefined || (typeof implementation === "object" && implementation !== null && Object.keys(implementation).join() === "opaque");
    if (!opaque) throw serviceError("invalid_argument", "a tool in an extension environment takes an opaque implementation (any JSON) or none");
    return implementation;
  }

  bind(context: BindingContext, options: ExtensionOptions): EnvironmentBinding {
    const { sealedCredential } = options;
    const { sealer } = this.#options;
    // Unsealed for each call, so the plaintext lives only as long as the request.
    const traced = new TracedCalls(options.url);
    const interceptors: Interceptor[] = [traced.interceptor];
    if (sealedCredential) {
      interceptors.push((next) => (request) => {
        request.header.set("authorization", `Bearer ${unsealCredential(sealer, sealedCredential)}`);
        return next(request);
      });
    }
    const client = createClient(ExtensionEnvironmentService, createConnectTransport({ baseUrl: options.url, httpVersion: "1.1", interceptors }));
    // What the extension echoes of its credential (in a message, details, an output) is never kept.
    // Unreadable, there is nothing to cut out: no call sends it (the interceptor refuses first).
    return redactingBinding(new ExtensionBinding(client, traced, context, options), () =>
      sealedCredential ? readableCredential(sealer, sealedCredential) : [],
    );
  }
}

class ExtensionBinding implements EnvironmentBinding {
  readonly stagesFiles = true;
  readonly #client: Client<typeof ExtensionEnvironmentService>;
  readonly #traced: TracedCalls;
  readonly #binding: { id: string; workspace: string };
  readonly #options: ExtensionOptions;

  constructor(client: Client<typeof ExtensionEnvironmentService>, traced: TracedCalls, context: BindingContext, options: ExtensionOptions) {
    this.#client = client;
    this.#traced = traced;
    this.#binding = { id: `${context.sessionId}/${context.environment}`, workspace: context.workspace };
    this.#options = options;
  }

  setup(deadlineMs: number): Promise<TerminalReceipt> {
    const configuration = fromJson(ValueSchema, JSON.parse(this.#options.configuration) as JsonValue);
    return unary((signal) => this.#client.setup({ binding: this.#binding, configuration }, { signal }), deadlineMs);
  }

  /**
   * An extension older than replace_directories ignores it and keeps the old files. One that does
   * not implement Stage at all (say, one wrapping an external service) answers `unimplemented`;
   * every run stages, one without skills or files too, so that answer to a Stage without files is
   * taken as `returned`: there was nothing to write, and an extension that never accepted a Stage
   * holds no skills/ of ours to replace. With files it stays a failure: they were not written.
   * (docs/host-and-extensions.md)
   */
  async stage({ replace, files }: Staging, deadlineMs: number, operationId: string): Promise<TerminalReceipt> {
    const request = {
      binding: this.#binding,
      operationId,
      replaceDirectories: [...replace],
      files: files.map(({ path, bytes }) => ({ path, content: bytes })),
    };
    const receipt = await unary((signal) => this.#client.stage(request, { signal }), deadlineMs);
    if (files.length === 0 && receipt.outcome === "failure" && receipt.code === "extension_unimplemented") return returned("{}");
    return receipt;
  }

  /** Streams the receipts; anything short of a terminal receipt after the call left is unknown. */
  execute(operation: ExecuteOperation): Promise<TerminalReceipt> {
    return this.#traced.execute(() => this.#execute(operation));
  }

  async #execute(operation: ExecuteOperation): Promise<TerminalReceipt> {
    const { signal, cancel, timedOut } = deadlineSignal(operation.deadlineMs + EXTENSION_DEADLINE_GRACE_MS);
    let answered = false;
    try {
      const request = {
        binding: this.#binding,
        operationId: operation.operationId,
        tool: operation.tool,
        input: jsonValue(operation.input),
        configuration: jsonValue(operation.configuration),
        deadline: timestampFromMs(operation.deadlineMs),
        ...(isOpaque(operation.implementation) ? { implementation: fromJson(ValueSchema, operation.implementation.opaque) } : {}),
      };
      for await (const response of this.#client.execute(request, { signal })) {
        answered = true;
        const receipt = terminalOf(response, operation);
        if (receipt) return receipt;
      }
      return unknown("the extension ended the stream without a terminal receipt");
    } catch (error) {
      if (timedOut()) {
        void this.cancel(operation.operationId, Date.now() + 5000);
        return failure("timeout", "the extension did not answer before the deadline; a cancel was sent");
      }
      return classify(error, answered);
    } finally {
      cancel();
    }
  }

  cancel(operationId: string, deadlineMs: number): Promise<TerminalReceipt> {
    return unary((signal) => this.#client.cancel({ binding: this.#binding, operationId }, { signal }), deadlineMs);
  }

  detach(deadlineMs: number): Promise<TerminalReceipt> {
    return unary((signal) => this.#client.detach({ binding: this.#binding }, { signal }), deadlineMs);
  }

  teardown(deadlineMs: number): Promise<TerminalReceipt> {
    return unary((signal) => this.#client.teardown({ binding: this.#binding }, { signal }), deadlineMs);
  }
}

async function unary(call: (signal: AbortSignal) => Promise<unknown>, deadlineMs: number): Promise<TerminalReceipt> {
  const { signal, cancel, timedOut } = deadlineSignal(deadlineMs);
  try {
    await call(signal);
    return returned("{}");
  } catch (error) {
    if (timedOut()) return failure("timeout", "the extension did not answer before the deadline");
    return classify(error, false);
  } finally {
    cancel();
  }
}

/**
 * By the rule of every environment: a call that never left is a failure (nothing happened); an
 * explicit refusal by the extension (a protocol error response, which carries response headers)
 * is a failure with its code; a connection lost after the call left, a reply that is not the
 * protocol (the client's own protocol errors carry no response headers), or an `internal` error
 * is unknown: the extension may have acted.
 */
function classify(error: unknown, answered: boolean): TerminalReceipt {
  const connectError = ConnectError.from(error);
  if (connectError.cause instanceof CredentialUnreadable) return failure("credential_unavailable", connectError.cause.message);
  const cause = (connectError.cause as { code?: unknown } | undefined)?.code;
  if (isNotSentCode(cause)) return failure("extension_unavailable", `the extension could not be reached (${cause}); nothing was sent`, true);
  const explicit = cause === undefined && [...connectError.metadata.keys()].length > 0;
  if (answered || !explicit || connectError.code === Code.Internal || connectError.code === Code.Unknown) {
    return unknown(`the call reached the extension but no reliable result came back: ${connectError.rawMessage}`);
  }
  const code = codeToString(connectError.code);
  return failure(
    code === "unavailable" ? "extension_unavailable" : `extension_${code}`,
    `the extension refused: ${connectError.rawMessage}`,
    code === "unavailable",
  );
}

function terminalOf(response: ExecuteResponse, operation: ExecuteOperation): TerminalReceipt | undefined {
  const { case: kind, value } = response.receipt;
  switch (kind) {
    case "accepted":
      operation.report({ outcome: "accepted" });
      return undefined;
    case "progress":
      operation.report({ outcome: "progress", data: value.message });
      return undefined;
    case "returned":
      return returned(value.output ? toJsonString(ValueSchema, value.output) : "null");
    case "failure":
      return failure(value.code || "tool_failed", value.message, value.retryable, Object.keys(value.details).length > 0 ? value.details : undefined);
    case undefined:
      return undefined;
  }
}

function jsonValue(text: string) {
  return fromJson(ValueSchema, JSON.parse(text) as JsonValue);
}

function isOpaque(implementation: unknown): implementation is { opaque: JsonValue } {
  return typeof implementation === "object" && implementation !== null && "opaque" in implementation;
}
