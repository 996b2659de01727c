import { Composer, isMap, isScalar, isSeq, Parser, type CST, type Document, type Node } from "yaml";
import { BundleFormatError } from "./errors.ts";

/**
 * Bounds on a SKILL.md frontmatter (docs/bundle-format.md §3). Within them parsing costs time
 * linear in the size and stays short: the yaml package's own duplicate-key check is quadratic in
 * the keys of a mapping, its composer recurses once per nesting level, and every alias makes it
 * rescan the document, so keys, depth and aliases are counted on the syntax tree first and
 * duplicate keys are found here with one set per mapping.
 */
export const FRONTMATTER_LIMITS = {
  /** UTF-8 bytes of YAML between the opening and the closing "---" line. */
  maxBytes: 64 * 1024,
  /** Mapping keys, all levels together. */
  maxKeys: 1000,
  /** Nesting of collections, block or flow: a top-level mapping is depth 1. */
  maxDepth: 32,
  /** Aliases (`*name`); also the cap on alias expansions. */
  maxAliases: 100,
} as const;

const encoder = new TextEncoder();

/** Parses the YAML of a frontmatter block into a plain object; throws frontmatter_* codes. */
export function parseFrontmatter(yamlText: string): Record<string, unknown> {
  const size = encoder.encode(yamlText).byteLength;
  if (size > FRONTMATTER_LIMITS.maxBytes) tooLarge(`has ${size} bytes; at most ${FRONTMATTER_LIMITS.maxBytes} are allowed`);
  const tokens = Array.from(new Parser().parse(yamlText));
  checkShape(tokens);
  const document = composeOne(tokens, yamlText.length);
  const error = document.errors[0];
  if (error !== undefined) invalid(`is not valid YAML: ${error.message}`);
  checkUniqueKeys(document.contents);
  const value = toPlainValue(document);
  // An empty block is an empty mapping, so it is reported as the missing description it lacks.
  if (value === null || value === undefined) return {};
  if (!isPlainObject(value)) invalid("must be a YAML mapping");
  return value;
}

/** Counts keys, nesting and aliases on the concrete syntax tree, without recursion: its depth is what is being checked. */
function checkShape(tokens: readonly CST.Token[]): void {
  let keys = 0;
  let aliases = 0;
  const pending: [CST.Token, number][] = tokens.map((token) => [token, 0]);
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [token, depth] = next;
    if (token.type === "document" && token.value) pending.push([token.value, depth]);
    if (token.type === "alias" && ++aliases > FRONTMATTER_LIMITS.maxAliases) tooLarge(`has more than ${FRONTMATTER_LIMITS.maxAliases} aliases`);
    if (token.type !== "block-map" && token.type !== "block-seq" && token.type !== "flow-collection") continue;
    if (depth + 1 > FRONTMATTER_LIMITS.maxDepth) tooLarge(`nests collections more than ${FRONTMATTER_LIMITS.maxDepth} deep`);
    for (const item of token.items) {
      // Mapping entries carry a key or a separator; sequence items carry neither.
      if ((item.key !== undefined || item.sep !== undefined) && ++keys > FRONTMATTER_LIMITS.maxKeys) {
        tooLarge(`has more than ${FRONTMATTER_LIMITS.maxKeys} keys`);
      }
      if (item.key) pending.push([item.key, depth + 1]);
      if (item.value) pending.push([item.value, depth + 1]);
    }
  }
}

/** What parseDocument does, minus parsing again: one document, a second one is an error. */
function composeOne(tokens: readonly CST.Token[], length: number): Document.Parsed {
  // uniqueKeys is off because its check compares every pair of keys; checkUniqueKeys replaces it.
  const composer = new Composer({ uniqueKeys: false });
  const [document, extra] = composer.compose(tokens, true, length);
  if (document === undefined) invalid("is not valid YAML");
  if (extra !== undefined) invalid("holds more than one YAML document");
  return document;
}

/** Refuses a mapping with two equal scalar keys, the rule of yaml's uniqueKeys, in linear time. */
function checkUniqueKeys(node: unknown): void {
  if (isSeq(node)) for (const item of node.items) checkUniqueKeys(item);
  if (!isMap(node)) return;
  const seen = new Set<unknown>();
  for (const { key, value } of node.items) {
    if (isScalar(key)) {
      if (seen.has(key.value)) invalid(`has the key ${JSON.stringify(String(key.value))} twice in one mapping`);
      seen.add(key.value);
    }
    checkUniqueKeys(key as Node | null);
    checkUniqueKeys(value);
  }
}

function toPlainValue(document: Document.Parsed): unknown {
  try {
    return document.toJS({ maxAliasCount: FRONTMATTER_LIMITS.maxAliases });
  } catch (cause) {
    return invalid(`cannot be read: ${String(cause)}`);
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && Object.getPrototypeOf(value) === Object.prototype;
}

function invalid(problem: string): never {
  throw new BundleFormatError("frontmatter_invalid", `the SKILL.md frontmatter ${problem}`);
}

function tooLarge(problem: string): never {
  throw new BundleFormatError("frontmatter_too_large", `the SKILL.md frontmatter ${problem}`);
}
