/**
 * jco's instantiation glue declares its runtime classes (task and per-component state) inside
 * `instantiate`, so every fresh instance gets fresh classes, and V8 builds their object shapes on
 * the instance's first call: about 0.15 ms of a hand-written component's 0.2 ms first call. This
 * adds, at the end of instantiation (after the core modules are instantiated, before the exports
 * are handed out), a warm-up that constructs the component's async state and one throwaway task
 * and then restores the counters the task constructor advanced. No guest code runs and nothing
 * the guest can observe changes; the instance's first call then finds its shapes built. With
 * spare instances this moves the cost off the request path.
 *
 * The patch is applied only when every anchor is found exactly once, otherwise the glue is left
 * as jco wrote it (the toolchain id includes jco's version, so a new jco is re-checked).
 */
const ANCHORS: RegExp[] = [
  /\blet RESOURCE_SCOPE_ID = 0;/g,
  /\bconst RESOURCE_SCOPE_TASKS = new Map\(\);/g,
  /\bfunction getOrCreateAsyncState\(componentIdx/g,
  /\bclass AsyncTask \{/g,
  /this\.#id = \+\+AsyncTask\._ID;/g,
  /this\.#resourceScopeId = \+\+RESOURCE_SCOPE_ID;/g,
  /RESOURCE_SCOPE_TASKS\.set\(this\.#resourceScopeId, this\);/g,
  /function\* _initGenerator \(\)/g,
];

/** The generator's final `return { <exports> };` right before it closes. */
const RETURN_ANCHOR = /\n([ \t]*)return \{ [\w$]+(?:, [\w$]+)*,? *\};\n[ \t]*\}\)\(\);/g;

const WARM_UP = `/* skillenv: build the glue's per-instance object shapes now; no guest code runs */
try { getOrCreateAsyncState(0); } catch {}
{
  const warmTaskId = AsyncTask._ID, warmScopeId = RESOURCE_SCOPE_ID;
  try {
    new AsyncTask({ componentIdx: 0, isAsync: false, isManualAsync: false, entryFnName: "skillenv-warm-up", errHandling: "throw-result-err", callingWasmExport: true });
  } catch {
  } finally {
    RESOURCE_SCOPE_TASKS.delete(warmScopeId + 1);
    AsyncTask._ID = warmTaskId;
    RESOURCE_SCOPE_ID = warmScopeId;
  }
}`;

export function warmGlue(source: string): { source: string; warmed: boolean } {
  for (const anchor of ANCHORS) {
    if ((source.match(anchor) ?? []).length !== 1) return { source, warmed: false };
  }
  const returns = [...source.matchAll(RETURN_ANCHOR)];
  if (returns.length !== 1) return { source, warmed: false };
  const match = returns[0]!;
  const indent = match[1] ?? "";
  const at = match.index! + 1; // after the newline
  const block = WARM_UP.split("\n")
    .map((line) => `${indent}${line}`)
    .join("\n");
  return { source: `${source.slice(0, at)}${block}\n${source.slice(at)}`, warmed: true };
}

/**
 * jco's glue also makes, per instance, the UTF-8 and UTF-16 text codecs and reads
 * `process.env.JCO_DEBUG` (a lookup in the process environment) on every one of its many debug
 * log calls. The codecs are stateless (the glue never decodes in streaming mode), so one set per
 * glue module serves every instance, and the debug switch is read once when the module loads:
 * about 5% of a hand-written component's instantiation and call. Each is replaced where jco
 * wrote it (glue without UTF-16 strings has no UTF-16 decoder); an anchor found more than once
 * leaves the whole glue as it is.
 */
const SHARED_PER_MODULE: [RegExp, string][] = [
  [/\bconst utf16Decoder = new TextDecoder\('utf-16'\);/g, "const utf16Decoder = SKILLENV_UTF16_DECODER;"],
  [/\bconst TEXT_DECODER_UTF8 = new TextDecoder\(\);/g, "const TEXT_DECODER_UTF8 = SKILLENV_UTF8_DECODER;"],
  [/\bconst TEXT_ENCODER_UTF8 = new TextEncoder\(\);/g, "const TEXT_ENCODER_UTF8 = SKILLENV_UTF8_ENCODER;"],
  [/if \(!globalThis\?\.process\?\.env\?\.JCO_DEBUG\) \{ return; \}/g, "if (!SKILLENV_JCO_DEBUG) { return; }"],
];
const INSTANTIATE_ANCHOR = /^export function instantiate\(/gm;
const MODULE_SCOPE = `/* skillenv: stateless codecs and jco's debug switch, once per module instead of per instance */
const SKILLENV_UTF16_DECODER = new TextDecoder('utf-16');
const SKILLENV_UTF8_DECODER = new TextDecoder();
const SKILLENV_UTF8_ENCODER = new TextEncoder();
const SKILLENV_JCO_DEBUG = Boolean(globalThis?.process?.env?.JCO_DEBUG);
`;

export function shareCodecs(source: string): { source: string; shared: boolean } {
  const found = (anchor: RegExp) => (source.match(anchor) ?? []).length;
  const present = SHARED_PER_MODULE.filter(([anchor]) => found(anchor) === 1);
  const ambiguous = SHARED_PER_MODULE.some(([anchor]) => found(anchor) > 1);
  if (ambiguous || present.length === 0 || found(INSTANTIATE_ANCHOR) !== 1) return { source, shared: false };
  let shared = source.replace(INSTANTIATE_ANCHOR, `${MODULE_SCOPE}export function instantiate(`);
  for (const [anchor, replacement] of present) shared = shared.replace(anchor, replacement);
  return { source: shared, shared: true };
}
