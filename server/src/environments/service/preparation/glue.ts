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
  const block = WARM_UP.split("\n").map((line) => `${indent}${line}`).join("\n");
  return { source: `${source.slice(0, at)}${block}\n${source.slice(at)}`, warmed: true };
}
