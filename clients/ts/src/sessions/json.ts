import type { JsonValue } from "@bufbuild/protobuf";

/** The value as JSON.stringify sees it (toJSON applied, undefined fields dropped); a TypeError when it has no JSON form. */
export function jsonSnapshot(value: unknown): JsonValue {
  const text = JSON.stringify(value);
  if (text === undefined) throw new TypeError(`${typeof value} is not a JSON value`);
  return JSON.parse(text) as JsonValue;
}

/** Whether the value has a JSON form: not a BigInt, a cycle, a function or undefined. */
export function hasJsonForm(value: unknown): boolean {
  try {
    jsonSnapshot(value);
    return true;
  } catch {
    return false;
  }
}
