import { ConnectError, type Interceptor } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { ExtensionEnvironmentService } from "../../../../gen/skillenv/extension/v1/extension_pb.js";
import { inSpan, markFailed, serverAttributes, SpanKind, startClientSpan, traceHeaders, type Attributes } from "../../tracing/index.ts";

/**
 * Each call to an extension as a client span of the RPC conventions (rpc.system connect_rpc,
 * rpc.service, rpc.method, server.address and server.port), its `traceparent` sent along so that
 * the extension's own spans join the trace. Nothing of a request, an answer or an error message.
 */
export class TracedCalls {
  readonly #server: Attributes;

  constructor(baseUrl: string) {
    this.#server = serverAttributes(baseUrl);
  }

  /**
   * Unary calls get their span here. A streamed call (Execute) is in the span `execute` made:
   * Connect's clients drop a stream left early (after the terminal receipt) without telling
   * the interceptor, so only the caller knows when the call is over.
   */
  readonly interceptor: Interceptor = (next) => async (request) => {
    if (request.stream) {
      for (const [name, value] of Object.entries(traceHeaders())) request.header.set(name, value);
      return next(request);
    }
    const { span, headers } = startClientSpan(`${request.service.typeName}/${request.method.name}`, this.#attributes(request.method.name));
    for (const [name, value] of Object.entries(headers)) request.header.set(name, value);
    try {
      return await next(request);
    } catch (error) {
      const code = error instanceof ConnectError ? codeToString(error.code) : "unknown";
      span.setAttribute("rpc.connect_rpc.error_code", code);
      markFailed(span, code);
      throw error;
    } finally {
      span.end();
    }
  };

  /** Runs an Execute call, `work`, in its client span. */
  execute<T>(work: () => Promise<T>): Promise<T> {
    return inSpan(`${ExtensionEnvironmentService.typeName}/Execute`, this.#attributes("Execute"), work, SpanKind.CLIENT);
  }

  #attributes(method: string): Attributes {
    return { "rpc.system": "connect_rpc", "rpc.service": ExtensionEnvironmentService.typeName, "rpc.method": method, ...this.#server };
  }
}
