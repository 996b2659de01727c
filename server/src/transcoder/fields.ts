import { ScalarType, type DescField, type DescMessage, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { HttpBodySchema } from "../../../gen/google/api/httpbody_pb.js";

/** A dotted field path such as `sub.subfield`, resolved against a message descriptor. */
export interface FieldPath {
  /** The singular message fields leading to the leaf, outermost first. */
  parents: DescField[];
  leaf: DescField;
}

/**
 * Resolves a dotted path by proto name or JSON name (fromJson accepts both). Every step but the
 * last must be a singular message field; maps and repeated messages cannot be traversed.
 */
export function resolveFieldPath(schema: DescMessage, names: readonly string[]): FieldPath | undefined {
  const fields: DescField[] = [];
  let message: DescMessage | undefined = schema;
  for (const name of names) {
    const field: DescField | undefined = message?.fields.find((f) => f.name === name || f.jsonName === name);
    if (field === undefined) return undefined;
    fields.push(field);
    message = field.fieldKind === "message" ? field.message : undefined;
  }
  const leaf = fields.pop();
  return leaf === undefined ? undefined : { parents: fields, leaf };
}

export function sameFieldPath(a: FieldPath, b: FieldPath): boolean {
  return a.leaf === b.leaf && a.parents.length === b.parents.length && a.parents.every((field, i) => field === b.parents[i]);
}

/** Path variables must bind singular primitive fields (http.proto). */
export function isPathLeaf(field: DescField): boolean {
  return field.fieldKind === "scalar" || field.fieldKind === "enum";
}

/** Query parameters bind primitive or repeated primitive fields; repeated messages and maps are excluded. */
export function isQueryLeaf(field: DescField): boolean {
  return isPathLeaf(field) || (field.fieldKind === "list" && field.listKind !== "message");
}

export function isHttpBody(schema: DescMessage | undefined): boolean {
  return schema?.typeName === HttpBodySchema.typeName;
}

/**
 * Converts a path or query value to what proto JSON expects: it reads numbers and strings from
 * JSON strings, but wants booleans and numeric enum values unquoted.
 */
export function textToJson(field: DescField, text: string): JsonValue {
  if (field.scalar === ScalarType.BOOL && (text === "true" || text === "false")) return text === "true";
  if (field.enum !== undefined && /^-?\d+$/.test(text)) return Number(text);
  return text;
}

/**
 * Sets `value` at `path` inside a proto JSON object, creating parent objects on the way. Repeated
 * fields collect every value; a singular field given twice is ambiguous and rejected.
 */
export function setJsonPath(root: JsonObject, path: FieldPath, value: JsonValue): void {
  let node = root;
  for (const parent of path.parents) node = (node[parent.jsonName] ??= {}) as JsonObject;
  const key = path.leaf.jsonName;
  if (path.leaf.fieldKind === "list") ((node[key] ??= []) as JsonValue[]).push(value);
  else if (key in node) throw new Error(`field ${path.leaf.name} is given more than once`);
  else node[key] = value;
}
