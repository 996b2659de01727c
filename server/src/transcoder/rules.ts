import { getOption, hasOption, type DescField, type DescMethod, type DescService } from "@bufbuild/protobuf";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { http } from "../../../gen/google/api/annotations_pb.js";
import type { HttpRule } from "../../../gen/google/api/http_pb.js";
import { isHttpBody, isPathLeaf, resolveFieldPath, type FieldPath } from "./fields.ts";
import { compareSpecificity, matchTemplate, parseTemplate, type PathTemplate } from "./path-template.ts";

/** One HTTP binding of a method: the main rule or one of its additional_bindings. */
export interface Rule {
  /** Upper-case for the standard verbs; a custom kind as written, where "*" means any method. */
  httpMethod: string;
  template: PathTemplate;
  method: DescMethod;
  handler: UniversalHandler;
  /** The field bound by each template variable, keyed by its dotted path. */
  pathFields: ReadonlyMap<string, FieldPath>;
  /** "*" for the whole message, a top-level field, or undefined for no body. */
  body: "*" | DescField | undefined;
  /** The body target is google.api.HttpBody: it takes the raw bytes instead of JSON. */
  rawBody: boolean;
  /** A server-streaming method: its responses are served as server-sent events. */
  streaming: boolean;
}

export interface RuleMatch {
  rule: Rule;
  pathValues: Map<string, string>;
}

/**
 * Reads the google.api.http rules of every unary and server-streaming method, most specific
 * first. Client and bidirectional streams are skipped: an HTTP request body is one message.
 * Invalid rules throw, so a bad annotation fails at start-up rather than on the first request.
 */
export function buildRules(services: readonly DescService[], handlers: readonly UniversalHandler[]): Rule[] {
  const rules = services
    .flatMap((service) => service.methods)
    .filter((method) => (method.methodKind === "unary" || method.methodKind === "server_streaming") && hasOption(method, http))
    .flatMap((method) => {
      const handler = findHandler(handlers, method);
      const main = getOption(method, http);
      // Bindings nested inside additional_bindings are not allowed by http.proto, so only one level is read.
      return [main, ...main.additionalBindings].map((binding) => createRule(method, handler, binding));
    });
  // Array.prototype.sort is stable: equally specific rules keep their declaration order.
  return rules.sort((a, b) => compareSpecificity(a.template, b.template) || anyMethodLast(a, b));
}

/** Returns the first (most specific) rule whose method and template match. */
export function findRule(rules: readonly Rule[], httpMethod: string, rawPath: string): RuleMatch | undefined {
  for (const rule of rules) {
    if (rule.httpMethod !== "*" && rule.httpMethod !== httpMethod) continue;
    const pathValues = matchTemplate(rule.template, rawPath);
    if (pathValues !== undefined) return { rule, pathValues };
  }
  return undefined;
}

function anyMethodLast(a: Rule, b: Rule): number {
  return Number(a.httpMethod === "*") - Number(b.httpMethod === "*");
}

function findHandler(handlers: readonly UniversalHandler[], method: DescMethod): UniversalHandler {
  const requestPath = `/${method.parent.typeName}/${method.name}`;
  const handler = handlers.find((h) => h.method === method || h.requestPath === requestPath);
  if (handler === undefined) throw new Error(`no Connect handler for ${requestPath}`);
  return handler;
}

function createRule(method: DescMethod, handler: UniversalHandler, binding: HttpRule): Rule {
  const where = `google.api.http of ${method.parent.typeName}.${method.name}`;
  // Silently ignoring response_body would serve the wrong JSON shape, so refuse it.
  if (binding.responseBody !== "") throw new Error(`${where}: response_body is not supported`);
  const { httpMethod, path } = patternOf(binding, where);
  const template = parseTemplate(path);
  const body = bodyOf(method, binding.body, where);
  return {
    httpMethod,
    template,
    method,
    handler,
    pathFields: pathFieldsOf(method, template, where),
    body,
    rawBody: isHttpBody(body === "*" ? method.input : body?.message),
    streaming: method.methodKind === "server_streaming",
  };
}

function patternOf(binding: HttpRule, where: string): { httpMethod: string; path: string } {
  const { pattern } = binding;
  switch (pattern.case) {
    case undefined:
      throw new Error(`${where}: no HTTP method and path`);
    case "custom":
      return { httpMethod: pattern.value.kind, path: pattern.value.path };
    default:
      return { httpMethod: pattern.case.toUpperCase(), path: pattern.value };
  }
}

function bodyOf(method: DescMethod, body: string, where: string): Rule["body"] {
  if (body === "") return undefined;
  if (body === "*") return "*";
  const field = method.input.fields.find((f) => f.name === body);
  if (field === undefined) throw new Error(`${where}: body field "${body}" is not in ${method.input.typeName}`);
  return field;
}

function pathFieldsOf(method: DescMethod, template: PathTemplate, where: string): Map<string, FieldPath> {
  const fields = new Map<string, FieldPath>();
  for (const { fieldPath } of template.variables) {
    const resolved = resolveFieldPath(method.input, fieldPath);
    const name = fieldPath.join(".");
    if (resolved === undefined || !isPathLeaf(resolved.leaf)) {
      throw new Error(`${where}: path variable "${name}" is not a singular primitive field of ${method.input.typeName}`);
    }
    fields.set(name, resolved);
  }
  return fields;
}
