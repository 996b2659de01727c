import { ScalarType, type DescEnum, type DescField, type DescMessage } from "@bufbuild/protobuf";
import type { Comments } from "./comments.ts";

/** A JSON Schema object in OpenAPI 3.1's dialect (JSON Schema 2020-12). */
export type JsonSchema = { readonly [keyword: string]: unknown };

/** What a list holds or a map maps to: one of a message, an enum and a scalar type. */
type ElementType =
  | { message: DescMessage; enum: undefined; scalar: undefined }
  | { message: undefined; enum: DescEnum; scalar: undefined }
  | { message: undefined; enum: undefined; scalar: ScalarType };

/** Proto3 JSON: 64-bit integers are strings (they accept numbers on input), bytes are base64. */
const SCALARS: Readonly<Record<ScalarType, JsonSchema>> = {
  [ScalarType.DOUBLE]: { type: "number", format: "double" },
  [ScalarType.FLOAT]: { type: "number", format: "float" },
  [ScalarType.INT64]: { type: "string", format: "int64" },
  [ScalarType.UINT64]: { type: "string", format: "uint64" },
  [ScalarType.INT32]: { type: "integer", format: "int32" },
  [ScalarType.FIXED64]: { type: "string", format: "uint64" },
  [ScalarType.FIXED32]: { type: "integer", format: "uint32" },
  [ScalarType.BOOL]: { type: "boolean" },
  [ScalarType.STRING]: { type: "string" },
  [ScalarType.BYTES]: { type: "string", contentEncoding: "base64" },
  [ScalarType.UINT32]: { type: "integer", format: "uint32" },
  [ScalarType.SFIXED32]: { type: "integer", format: "int32" },
  [ScalarType.SFIXED64]: { type: "string", format: "int64" },
  [ScalarType.SINT32]: { type: "integer", format: "int32" },
  [ScalarType.SINT64]: { type: "string", format: "int64" },
};

/** The proto3 JSON forms of the well-known types the API reaches; they are not objects of their fields. */
const WELL_KNOWN: Readonly<Record<string, JsonSchema>> = {
  "google.protobuf.Timestamp": { type: "string", format: "date-time", description: "RFC 3339, e.g. 2026-01-02T03:04:05Z" },
  "google.protobuf.Duration": { type: "string", pattern: "^-?[0-9]+(\\.[0-9]{1,9})?s$", description: "Seconds with an s suffix, e.g. 1.5s" },
  "google.protobuf.Struct": { type: "object" },
  // Any JSON value: the empty schema.
  "google.protobuf.Value": {},
  // The packed message's fields beside its type URL (google.api.HttpBody.extensions holds these).
  "google.protobuf.Any": { type: "object", properties: { "@type": { type: "string" } }, required: ["@type"] },
};

/**
 * The JSON schemas of messages, fields and enums under the proto3 JSON mapping, as the transcoder
 * reads and writes them: lowerCamelCase names, 64-bit integers as strings, enums by name,
 * well-known types in their JSON form. A message or enum becomes a component, named by its
 * fully-qualified name, the first time it is referred to.
 */
export class SchemaSet {
  readonly #comments: Comments;
  readonly #components = new Map<string, JsonSchema>();

  constructor(comments: Comments) {
    this.#comments = comments;
  }

  /** The components referred to so far, by name. */
  components(): Record<string, JsonSchema> {
    return Object.fromEntries([...this.#components].sort(([a], [b]) => a.localeCompare(b)));
  }

  message(message: DescMessage): JsonSchema {
    const wellKnown = WELL_KNOWN[message.typeName];
    if (wellKnown !== undefined) return wellKnown;
    return this.#component(message.typeName, () => this.object(message, []));
  }

  /** A message as a JSON object of its fields, leaving out `omitted` ones (bound elsewhere, e.g. by the path). */
  object(message: DescMessage, omitted: readonly DescField[]): JsonSchema {
    const fields = message.fields.filter((field) => !omitted.includes(field));
    const properties = Object.fromEntries(fields.map((field) => [field.jsonName, this.field(field)]));
    return described({ type: "object", properties }, this.#comments.get(message.typeName));
  }

  /** A field's value, with the field's comment as description. */
  field(field: DescField): JsonSchema {
    return described(this.value(field), fieldComment(this.#comments, field));
  }

  /** A field's value alone, for where the description has a place of its own (parameters). */
  value(field: DescField): JsonSchema {
    switch (field.fieldKind) {
      case "scalar":
        return SCALARS[field.scalar];
      case "enum":
        return this.#enum(field.enum);
      case "message":
        return this.message(field.message);
      case "list":
        return { type: "array", items: this.#element(field) };
      case "map":
        // JSON object keys are strings whatever the key type; values follow the value type.
        return { type: "object", additionalProperties: this.#element(field) };
    }
  }

  /** The schema of a list's elements or a map's values. */
  #element(type: ElementType): JsonSchema {
    if (type.message !== undefined) return this.message(type.message);
    if (type.enum !== undefined) return this.#enum(type.enum);
    return SCALARS[type.scalar];
  }

  #enum(enumType: DescEnum): JsonSchema {
    const build = () => described({ type: "string", enum: enumType.values.map((value) => value.name) }, this.#comments.get(enumType.typeName));
    return this.#component(enumType.typeName, build);
  }

  #component(typeName: string, build: () => JsonSchema): JsonSchema {
    // The well-known types without an entry above have JSON forms of their own (Any, FieldMask, wrappers, ...).
    if (typeName.startsWith("google.protobuf.")) throw new Error(`${typeName}: its proto3 JSON form is not described yet; add it to WELL_KNOWN`);
    if (!this.#components.has(typeName)) {
      // Claimed before building, so a message that refers to itself gets a $ref instead of endless recursion.
      this.#components.set(typeName, {});
      this.#components.set(typeName, build());
    }
    return { $ref: `#/components/schemas/${typeName}` };
  }
}

export function fieldComment(comments: Comments, field: DescField): string | undefined {
  return comments.get(`${field.parent.typeName}.${field.name}`);
}

function described(schema: JsonSchema, description: string | undefined): JsonSchema {
  return description === undefined ? schema : { ...schema, description };
}
