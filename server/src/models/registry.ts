import type { Settings } from "../config/index.ts";
import { createAnthropicProvider } from "./anthropic.ts";
import { createOpenAIChatProvider } from "./openai-chat.ts";
import { tracedModelCalls } from "./model-span.ts";
import { createOpenAIResponsesProvider } from "./openai-responses.ts";
import { ModelError, type ModelProvider } from "./port.ts";
import type { ProviderOptions } from "./transport.ts";

/** The model providers by name ("anthropic", "openai"), the names a run's provider key map uses. */
export type ModelProviders = ReadonlyMap<string, ModelProvider>;

/**
 * `maxJsonDepth`: SERVICE_JOURNAL_MAX_JSON_DEPTH, the deepest tool call input a reply may carry.
 * The `openai` provider speaks the API the settings choose for its base URL (SERVICE_OPENAI_API).
 */
export function createModelProviders(settings: Settings["models"], maxJsonDepth: number): ModelProviders {
  const common: Omit<ProviderOptions, "baseUrl"> = { maxRetries: settings.maxRetries, timeoutMs: settings.timeoutSecs * 1000, maxJsonDepth };
  const createOpenAIProvider = settings.openaiApi === "responses" ? createOpenAIResponsesProvider : createOpenAIChatProvider;
  const providers = [
    tracedModelCalls(createAnthropicProvider({ ...common, baseUrl: settings.anthropicBaseUrl }), settings.anthropicBaseUrl),
    tracedModelCalls(createOpenAIProvider({ ...common, baseUrl: settings.openaiBaseUrl }), settings.openaiBaseUrl),
  ];
  return new Map(providers.map((provider) => [provider.name, provider]));
}

/** One model call that ended: its provider, `ok` or its model error's code, and how long it took. */
export type ModelCallObserver = (call: { provider: string; code: string; seconds: number }) => void;

/** The providers, each call of which is told to `observe` once it has ended (the metrics). */
export function observeModelCalls(providers: ModelProviders, observe: ModelCallObserver): ModelProviders {
  return new Map(
    [...providers].map(([name, provider]) => [
      name,
      {
        name: provider.name,
        async complete(request, options) {
          const started = performance.now();
          const seconds = () => (performance.now() - started) / 1000;
          try {
            const response = await provider.complete(request, options);
            observe({ provider: name, code: "ok", seconds: seconds() });
            return response;
          } catch (error) {
            observe({ provider: name, code: error instanceof ModelError ? error.code : "internal", seconds: seconds() });
            throw error;
          }
        },
      } satisfies ModelProvider,
    ]),
  );
}
