import { inSpan, serverAttributes, SpanKind } from "../tracing/index.ts";
import type { ModelProvider } from "./port.ts";

/**
 * The provider, each call of which is a client span as the GenAI conventions describe one:
 * `chat <model>`, with the provider, the model, the token limit, the usage the provider reported
 * and why the reply stopped; a failure's ModelError code as error.type. Never the prompt, the
 * messages, the tools' inputs or the reply's text, nor the key. The span is current while the
 * call runs, so the request carries its `traceparent` (transport.ts).
 */
export function tracedModelCalls(provider: ModelProvider, baseUrl: string): ModelProvider {
  const server = serverAttributes(baseUrl);
  return {
    name: provider.name,
    complete: (request, options) =>
      inSpan(
        `chat ${request.model}`,
        {
          "gen_ai.operation.name": "chat",
          "gen_ai.provider.name": provider.name,
          "gen_ai.system": provider.name,
          "gen_ai.request.model": request.model,
          "gen_ai.request.max_tokens": request.maxTokens,
          ...server,
        },
        async (span) => {
          const response = await provider.complete(request, options);
          span.setAttributes({
            "gen_ai.usage.input_tokens": response.usage.inputTokens,
            "gen_ai.usage.output_tokens": response.usage.outputTokens,
            "gen_ai.response.finish_reasons": [response.stopReason],
          });
          return response;
        },
        SpanKind.CLIENT,
      ),
  };
}
