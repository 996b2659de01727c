/**
 * Path templates of google.api.http rules (google/api/http.proto, "Path template syntax"):
 *
 *     Template = "/" Segments [ Verb ] ;
 *     Segments = Segment { "/" Segment } ;
 *     Segment  = "*" | "**" | LITERAL | Variable ;
 *     Variable = "{" FieldPath [ "=" Segments ] "}" ;
 *     FieldPath = IDENT { "." IDENT } ;
 *     Verb     = ":" LITERAL ;
 */

export type Segment = { kind: "literal"; value: string } | { kind: "wildcard" } | { kind: "deep-wildcard" };

/** A variable captures the template segments [start, end), e.g. `{name=shelves/*}` two of them. */
export interface Variable {
  fieldPath: string[];
  start: number;
  end: number;
}

export interface PathTemplate {
  source: string;
  segments: Segment[];
  variables: Variable[];
  verb: string | undefined;
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function parseTemplate(source: string): PathTemplate {
  try {
    return parse(source);
  } catch (error) {
    throw new Error(`invalid path template "${source}": ${(error as Error).message}`);
  }
}

function parse(source: string): PathTemplate {
  if (!source.startsWith("/")) throw new Error("must start with /");
  const { path, verb } = splitVerb(source.slice(1));
  if (verb !== undefined && !isLiteral(verb)) throw new Error(`bad verb "${verb}"`);
  const template: PathTemplate = { source, segments: [], variables: [], verb };
  for (const token of tokenize(path)) {
    if (token.startsWith("{")) parseVariable(token.slice(1, -1), template);
    else template.segments.push(parseSegment(token));
  }
  const deep = template.segments.findIndex((segment) => segment.kind === "deep-wildcard");
  if (deep !== -1 && deep !== template.segments.length - 1) throw new Error("** must be the last segment");
  return template;
}

/** The verb is the text after the last ":" that is not inside a variable. */
function splitVerb(text: string): { path: string; verb: string | undefined } {
  const colon = text.lastIndexOf(":");
  if (colon === -1 || colon < text.lastIndexOf("}")) return { path: text, verb: undefined };
  return { path: text.slice(0, colon), verb: text.slice(colon + 1) };
}

/** Splits on "/" outside braces, so a variable with its sub-segments is one token. */
function tokenize(path: string): string[] {
  const tokens = [""];
  let depth = 0;
  for (const char of path) {
    if (char === "{") depth += 1;
    if (char === "}") depth -= 1;
    if (depth < 0 || depth > 1) throw new Error("unbalanced or nested braces");
    if (char === "/" && depth === 0) tokens.push("");
    else tokens[tokens.length - 1] += char;
  }
  if (depth !== 0) throw new Error("unbalanced braces");
  return tokens;
}

/** `{a.b}` is short for `{a.b=*}`. */
function parseVariable(body: string, template: PathTemplate): void {
  const equals = body.indexOf("=");
  const fieldPath = equals === -1 ? body : body.slice(0, equals);
  const pattern = equals === -1 ? "*" : body.slice(equals + 1);
  const names = fieldPath.split(".");
  if (!names.every((name) => IDENT.test(name))) throw new Error(`bad field path "${fieldPath}"`);
  const start = template.segments.length;
  for (const token of pattern.split("/")) template.segments.push(parseSegment(token));
  template.variables.push({ fieldPath: names, start, end: template.segments.length });
}

function parseSegment(token: string): Segment {
  if (token === "*") return { kind: "wildcard" };
  if (token === "**") return { kind: "deep-wildcard" };
  if (!isLiteral(token)) throw new Error(`bad segment "${token}"`);
  return { kind: "literal", value: token };
}

/** Literals are compared with the raw (still percent-encoded) URL, so they hold no syntax characters. */
function isLiteral(token: string): boolean {
  return token !== "" && !/[/{}=*:?#\s]/.test(token);
}

/**
 * Matches a raw URL path (percent-encoded, without query) and returns the decoded variable values
 * keyed by dotted field path, or undefined when the path does not match or is badly encoded.
 */
export function matchTemplate(template: PathTemplate, rawPath: string): Map<string, string> | undefined {
  const path = stripVerb(rawPath, template.verb);
  if (path === undefined || !path.startsWith("/")) return undefined;
  const parts = path.slice(1).split("/");
  if (!segmentsMatch(template.segments, parts)) return undefined;
  const values = new Map<string, string>();
  for (const variable of template.variables) {
    const value = variableValue(template.segments, parts, variable);
    if (value === undefined) return undefined;
    values.set(variable.fieldPath.join("."), value);
  }
  return values;
}

function stripVerb(rawPath: string, verb: string | undefined): string | undefined {
  if (verb === undefined) return rawPath;
  const suffix = `:${verb}`;
  return rawPath.endsWith(suffix) ? rawPath.slice(0, -suffix.length) : undefined;
}

/** Segment i matches part i; a trailing `**` takes all remaining parts, possibly none. */
function segmentsMatch(segments: Segment[], parts: string[]): boolean {
  const deep = segments.at(-1)?.kind === "deep-wildcard";
  const fixed = deep ? segments.length - 1 : segments.length;
  if (deep ? parts.length < fixed : parts.length !== fixed) return false;
  return segments.slice(0, fixed).every((segment, i) => segmentMatches(segment, parts[i] ?? ""));
}

function segmentMatches(segment: Segment, part: string): boolean {
  if (segment.kind === "literal") return segment.value === part;
  return part !== "";
}

function variableValue(segments: Segment[], parts: string[], variable: Variable): string | undefined {
  const end = variable.end === segments.length ? parts.length : variable.end;
  const raw = parts.slice(variable.start, end).join("/");
  const single = variable.end - variable.start === 1 && segments[variable.start]?.kind !== "deep-wildcard";
  return single ? decode(raw) : decodeKeepingSlashes(raw);
}

/** Single-segment variables are fully percent-decoded (http.proto, RFC 6570 simple expansion). */
function decode(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}

/** Multi-segment variables are decoded except "%2F"/"%2f", which stay as they are (http.proto). */
function decodeKeepingSlashes(raw: string): string | undefined {
  const pieces = raw.split(/(%2[Ff])/).map((piece, i) => (i % 2 === 1 ? piece : decode(piece)));
  return pieces.includes(undefined) ? undefined : pieces.join("");
}

/**
 * Orders templates from most to least specific: more literal segments (a verb counts as one)
 * first, then fewer `**`. Templates that tie are equally specific.
 */
export function compareSpecificity(a: PathTemplate, b: PathTemplate): number {
  const [literalsA, deepA] = specificity(a);
  const [literalsB, deepB] = specificity(b);
  return literalsB - literalsA || deepA - deepB;
}

function specificity(template: PathTemplate): [literals: number, deep: number] {
  const count = (kind: Segment["kind"]) => template.segments.filter((segment) => segment.kind === kind).length;
  return [count("literal") + (template.verb === undefined ? 0 : 1), count("deep-wildcard")];
}
