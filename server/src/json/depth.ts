/**
 * How deeply JSON nests: the number of arrays and objects around its innermost value (`1` and
 * `"x"` are 0, `[]` and `{"a": 1}` are 1, `[[1]]` is 2).
 *
 * The API carries JSON payloads as google.protobuf.Value, which costs two nested messages per
 * level (a Value and its Struct or ListValue), and protobuf decoders stop at 100 nested messages
 * (protobuf-es in the clients and in the service's own JSON transcoder, Python's protobuf): JSON
 * nested too deeply cannot be read back at all. So the service bounds nesting where peer data
 * enters (docs/sessions.md) and delivers what it holds within what decoders read (capDepth).
 */

/**
 * The nesting depth of JSON text, by scanning it (strings skipped): no parse, no allocation. Of
 * text that is not JSON it counts brackets outside quotes, which may mean nothing (isJsonText).
 */
export function jsonTextDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < text.length; i++) {
    const char = text.charCodeAt(i);
    if (char === QUOTE) {
      // Past the string: a backslash escapes the character after it.
      for (i++; i < text.length && text.charCodeAt(i) !== QUOTE; i++) if (text.charCodeAt(i) === BACKSLASH) i++;
    } else if (char === OPEN_BRACKET || char === OPEN_BRACE) {
      if (++depth > deepest) deepest = depth;
    } else if (char === CLOSE_BRACKET || char === CLOSE_BRACE) {
      depth--;
    }
  }
  return deepest;
}

export function isJsonText(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** Whether a parsed JSON value nests deeper than `maxDepth`; looks no deeper than that. */
export function exceedsDepth(value: unknown, maxDepth: number): boolean {
  if (typeof value !== "object" || value === null) return false;
  if (maxDepth === 0) return true;
  for (const child of Array.isArray(value) ? value : Object.values(value)) if (exceedsDepth(child, maxDepth - 1)) return true;
  return false;
}

/**
 * The value with every array or object that lies deeper than `maxDepth` replaced by its JSON
 * text, a string: nothing is lost, and the result nests at most `maxDepth` deep. A value within
 * the bound is returned as it is.
 */
export function capDepth(value: unknown, maxDepth: number): unknown {
  if (!exceedsDepth(value, maxDepth)) return value;
  if (maxDepth === 0) return JSON.stringify(value);
  if (Array.isArray(value)) return value.map((child) => capDepth(child, maxDepth - 1));
  return Object.fromEntries(Object.entries(value as object).map(([key, child]) => [key, capDepth(child, maxDepth - 1)]));
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
