import type { JsonValue } from "@bufbuild/protobuf";
import type { SetupMode } from "./environments.ts";
import { keepCredential } from "./credentials.ts";
import { hasJsonForm, jsonSnapshot } from "./json.ts";

/** The type of one instance option; with a trailing "?" the option may be omitted. */
export type OptionType = "string" | "number" | "boolean" | "string[]" | "json";
export type OptionSpec = OptionType | `${OptionType}?`;

/** The options an extension's instances take, by name, e.g. `{ region: "string", size: "number?" }`. */
export type OptionsSchema = Readonly<Record<string, OptionSpec>>;

interface OptionValues {
  string: string;
  number: number;
  boolean: boolean;
  "string[]": string[];
  json: JsonValue;
}

/** The options a schema describes, as TypeScript sees them: `{ region: string; size?: number }`. */
export type OptionsOf<S extends OptionsSchema> = {
  -readonly [K in keyof S as S[K] extends OptionType ? K : never]: S[K] extends OptionType ? OptionValues[S[K]] : never;
} & {
  -readonly [K in keyof S as S[K] extends `${OptionType}?` ? K : never]?: S[K] extends `${infer T extends OptionType}?` ? OptionValues[T] : never;
};

/** An extension environment kind (spec §2.6): how its instances' options become what the service needs. */
export interface ExtensionKind<S extends OptionsSchema> {
  /** The schema of the instance options. */
  options: S;
  /** The instance's base URL (http or https); the service's network allow-list must include it. */
  url(options: OptionsOf<S>): string;
  /** The bearer credential the service sends the instance, if any; sealed by the service, never journaled or shown. */
  credential?(options: OptionsOf<S>): string | undefined;
  /** The configuration the service carries unread to the instance's setup (any JSON value). */
  configure?(options: OptionsOf<S>): unknown;
}

/** What an instance is created with: its name in a session, its setup mode, and the kind's options. */
export type ExtensionInstanceOptions<S extends OptionsSchema> = OptionsOf<S> & { name: string; setup?: SetupMode };

/**
 * An extension environment: an instance reached over HTTP. The credential is not among its
 * fields, so printing or serialising the definition never shows it; `hasCredential` says
 * whether one goes with it.
 */
export interface ExtensionEnvironmentDefinition {
  readonly kind: "extension";
  readonly name: string;
  readonly setup: SetupMode;
  readonly url: string;
  readonly configuration: JsonValue | undefined;
  readonly hasCredential: boolean;
}

const OPTION_TYPES: ReadonlySet<string> = new Set(["string", "number", "boolean", "string[]", "json"]);
/** Every instance takes these; a kind cannot declare them. */
const RESERVED = ["name", "setup"];

/**
 * Defines an extension environment kind (spec §2.6). The result makes instance definitions:
 * `shell({ name: "sh", region: "eu" })` checks the options against the schema, computes the
 * URL, credential and configuration from them, and performs no I/O. Mistakes in the kind or in
 * an instance's options are TypeErrors naming the option.
 */
export function environment<const S extends OptionsSchema>(kind: ExtensionKind<S>): (options: ExtensionInstanceOptions<S>) => ExtensionEnvironmentDefinition {
  checkSchema(kind.options);
  return (instance) => {
    const { name, setup, ...rest } = instance as { name: string; setup?: SetupMode } & Record<string, unknown>;
    const what = `extension environment ${JSON.stringify(name)}`;
    const options = checkOptions(kind.options, rest, what) as OptionsOf<S>;
    const credential = kind.credential?.(options);
    if (credential !== undefined && (typeof credential !== "string" || credential === ""))
      throw new TypeError(`${what}: the credential must be a non-empty string or undefined`);
    const definition: ExtensionEnvironmentDefinition = Object.freeze({
      kind: "extension",
      name,
      setup: setup ?? "automatic",
      url: checkUrl(kind.url(options), what),
      configuration: checkConfiguration(kind.configure?.(options), what),
      hasCredential: credential !== undefined,
    });
    if (credential !== undefined) keepCredential(definition, credential);
    return definition;
  };
}

function checkSchema(schema: OptionsSchema): void {
  for (const [option, spec] of Object.entries(schema)) {
    if (RESERVED.includes(option)) throw new TypeError(`an extension environment's options cannot declare ${option}: every instance takes it`);
    if (!OPTION_TYPES.has(spec.replace(/\?$/, "")))
      throw new TypeError(`option ${option}: ${JSON.stringify(spec)} is not one of ${[...OPTION_TYPES].join(", ")} (with "?" when optional)`);
  }
}

function checkOptions(schema: OptionsSchema, given: Record<string, unknown>, what: string): Record<string, unknown> {
  for (const option of Object.keys(given)) {
    if (!Object.hasOwn(schema, option))
      throw new TypeError(`${what}: unknown option ${option}; the options are ${[...RESERVED, ...Object.keys(schema)].join(", ")}`);
  }
  for (const [option, spec] of Object.entries(schema)) {
    const value = given[option];
    const optional = spec.endsWith("?");
    if (value === undefined) {
      if (!optional) throw new TypeError(`${what}: option ${option} is required`);
      continue;
    }
    const type = spec.replace(/\?$/, "") as OptionType;
    if (!hasType(value, type))
      throw new TypeError(`${what}: option ${option} must be ${type === "json" ? "a JSON value" : `a ${type}`}, not ${describe(value)}`);
  }
  return given;
}

function hasType(value: unknown, type: OptionType): boolean {
  switch (type) {
    case "string[]":
      return Array.isArray(value) && value.every((item) => typeof item === "string");
    case "json":
      return hasJsonForm(value);
    default:
      return typeof value === type && !(type === "number" && !Number.isFinite(value));
  }
}

function describe(value: unknown): string {
  if (Array.isArray(value)) return "an array";
  if (value === null) return "null";
  if (typeof value === "object") return "an object";
  return `${JSON.stringify(value) ?? String(value)} (a ${typeof value})`;
}

function checkUrl(url: unknown, what: string): string {
  if (typeof url === "string" && URL.canParse(url) && /^https?:$/.test(new URL(url).protocol)) return url;
  throw new TypeError(`${what}: the url must be an http(s) URL, not ${JSON.stringify(url)}`);
}

function checkConfiguration(configuration: unknown, what: string): JsonValue | undefined {
  if (configuration === undefined) return undefined;
  try {
    return jsonSnapshot(configuration);
  } catch (error) {
    throw new TypeError(`${what}: the configuration is not JSON: ${(error as Error).message}`);
  }
}
