export {
  addUsage,
  ModelError,
  type AssistantContent,
  type ConversationMessage,
  type ModelCallOptions,
  type ModelErrorCode,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
  type StopReason,
  type ToolDefinition,
  type ToolResultContent,
  type Usage,
  type UserContent,
} from "./port.ts";
export { createModelProviders, observeModelCalls, type ModelCallObserver, type ModelProviders } from "./registry.ts";
export { thinkingOf, type Thinking } from "./thinking.ts";
export { createAnthropicProvider } from "./anthropic.ts";
export { createOpenAIChatProvider } from "./openai-chat.ts";
export { createOpenAIResponsesProvider } from "./openai-responses.ts";
export type { ProviderOptions } from "./transport.ts";
