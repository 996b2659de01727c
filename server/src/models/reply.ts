import { jsonTextDepth } from "../json/index.ts";
import { ModelError, type AssistantContent, type StopReason } from "./port.ts";

/** A reply's content while it streams in: text as it grows, a tool call's input as JSON text. */
export type ContentDraft = TextDraft | ToolCallDraft;
export type TextDraft = { type: "text"; text: string };
export type ToolCallDraft = { type: "tool_call"; id: string; name: string; json: string };

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

/** A tool without input streams no input text at all. Undefined when the text is not JSON. */
function parseInput(json: string): unknown {
  if (json === "") return {};
  try {
    return JSON.parse(json);
  } catch {
    return undefined;
  }
}
