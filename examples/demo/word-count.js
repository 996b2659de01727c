// word_count: a tool program for the js-program-tool runtime (docs/components.md). The runtime
// evaluates this script for each call and calls run(input).
//
// Input:  {"text": "..."}
// Output: {"words": N, "lines": N, "characters": N}
// biome-ignore lint/correctness/noUnusedVariables: the runtime calls it
function run(input) {
  if (typeof input?.text !== "string") throw { code: "invalid_input", message: 'expected {"text": string}' };
  const text = input.text;
  return {
    words: text.split(/\s+/).filter((word) => word !== "").length,
    lines: text === "" ? 0 : text.split("\n").length,
    characters: [...text].length,
  };
}
