import { jsonTextDepth } from "../json/index.ts";
import { ModelError, type AssistantContent, type ProviderBlock, type StopReason } from "./port.ts";

/** A reply's content while it streams in: text as it grows, a tool call's input as JSON text. */
export type ContentDraft = TextDraft | ToolCallDraft | ProviderBlockDraft;
export type TextDraft = { type: "text"; text: string };
export type ToolCallDraft = { type: "tool_call"; id: string; name: string; json: string };
/** A block the port does not interpret, as it grows; `json` is input streamed as JSON text (a server tool's), if any. */
export type ProviderBlockDraft = { type: "provider_block"; block: Record<string, unknown>; json: string };

/**
 * The finished content, in draft order. Empty text is dropped (providers refuse empty text sent
 * back to them). A reply cut off by max_tokens may end inside a tool call's input: that call was
 * never finished, so it is dropped, and the stop reason tells the caller why. A tool call input
 * nested deeper than `maxJsonDepth` (SERVICE_JOURNAL_MAX_JSON_DEPTH) is a reply the service cannot
 * keep, in its events or its journal: model_invalid_response, as an input that is not JSON is.
 */
export function finishContent(drafts: Iterable<ContentDraft>, stopReason: StopReason, provider: string, maxJsonDepth: number): AssistantContent[] {
  const content: AssistantContent[] = [];
  for (const draft of drafts) {
    if (draft.type === "text") {
      if (draft.text !== "") content.push({ type: "text", text: draft.text });
      continue;
    }
    if (draft.type === "provider_block") {
      content.push(finishProviderBlock(draft, provider, maxJsonDepth));
      continue;
    }
    const input = parseInput(draft.json);
    if (input === undefined && stopReason === "max_tokens") continue;
    if (input === undefined || draft.id === "" || draft.name === "") {
      throw new ModelError("model_invalid_response", `${provider}: a tool call of the reply lacks an id, a name or JSON input`);
    }
    const depth = jsonTextDepth(draft.json);
    if (depth > maxJsonDepth) {
      throw new ModelError(
        "model_invalid_response",
        `${provider}: the input of tool call ${draft.name} nests ${depth} levels deep, more than the ${maxJsonDepth} the service keeps`,
      );
    }
    content.push({ type: "tool_call", id: draft.id, name: draft.name, input });
  }
  return content;
}

/** The block as the provider sent it, its streamed input parsed; one the service could not keep is model_invalid_response. */
function finishProviderBlock(draft: ProviderBlockDraft, provider: string, maxJsonDepth: number): ProviderBlock {
  const block = { ...draft.block };
  if (draft.json !== "") {
    const input = parseInput(draft.json);
    if (input === undefined) throw new ModelError("model_invalid_response", `${provider}: a ${String(block.type)} block's input is not JSON`);
    block.input = input;
  }
  const depth = jsonTextDepth(JSON.stringify(block));
  if (depth > maxJsonDepth) {
    throw new ModelError(
      "model_invalid_response",
      `${provider}: a ${String(block.type)} block nests ${depth} levels deep, more than the ${maxJsonDepth} the service keeps`,
    );
  }
  return { type: "provider_block", provider, block };
}

/** A tool without input streams no input text at all. Undefined when the text is not JSON. */
function parseInput(json: string): unknown {
  if (json === "") return {};
  try {
    return JSON.parse(json);
  } catch {
    return undefined;
  }
}
