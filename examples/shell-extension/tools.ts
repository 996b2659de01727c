/**
 * The three tools a placement can name: run a shell command, read a file, write a file, all in
 * the binding's workspace. Inputs come from a model, so each is checked before anything runs.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { runCommand } from "./command.ts";
import { readInWorkspace, WorkspacePathError, writeInWorkspace } from "./files.ts";
import type { Sandbox } from "./sandbox.ts";

const TOOLS = ["shell", "read_file", "write_file"] as const;
export type ToolName = (typeof TOOLS)[number];

/** A tool's failure, reported as the operation's failure receipt. */
export class ToolFailure extends Error {
  readonly code: string;
  readonly details: Record<string, string>;

  constructor(code: string, message: string, details: Record<string, string> = {}) {
    super(message);
    this.code = code;
    this.details = details;
  }
}

export interface ToolContext {
  /** The workspace's host path. */
  workspace: string;
  sandbox: Sandbox;
  outputLimit: number;
  /** Time left until the request's deadline; undefined: it has none. */
  remainingMs: number | undefined;
  signal: AbortSignal;
}

/** The placement's implementation `{"tool": name}` picks the tool; when it is empty, the placed tool's own name does. */
export function chooseTool(implementation: JsonValue, placedTool: string): ToolName {
  const named = namedTool(implementation, placedTool);
  const tool = TOOLS.find((candidate) => candidate === named);
  if (tool === undefined)
    throw new ToolFailure("unknown_tool", `this extension runs ${TOOLS.join(", ")}: name one as {"tool": "<name>"} in the placement's implementation`);
  return tool;
}

function namedTool(implementation: JsonValue, placedTool: string): JsonValue | undefined {
  if (implementation === null) return placedTool;
  if (!isObject(implementation)) return undefined;
  return Object.keys(implementation).length === 0 ? placedTool : implementation.tool;
}

/** Runs a tool to its output, or throws ToolFailure. */
export async function runTool(tool: ToolName, input: JsonValue, context: ToolContext): Promise<JsonValue> {
  try {
    switch (tool) {
      case "shell":
        return await shell(input, context);
      case "read_file":
        return await readFile(input, context);
      case "write_file":
        return await writeFile(input, context);
    }
  } catch (error) {
    if (error instanceof WorkspacePathError) throw new ToolFailure(error.code, error.message);
    throw error;
  }
}

/** `{command, timeoutMs?}` -> `{exitCode, stdout, stderr, truncated}`; a non-zero exit is an output, not a failure. */
async function shell(input: JsonValue, context: ToolContext): Promise<JsonValue> {
  const fields = inputObject(input);
  const command = stringField(fields, "command");
  const timeoutMs = optionalTimeout(fields);
  const limit = earliest(timeoutMs, context.remainingMs);
  const launch = context.sandbox.launch(command, context.workspace);
  const outcome = await runCommand(launch, { outputLimit: context.outputLimit, timeoutMs: limit, signal: context.signal });
  const { exitCode, stdout, stderr, truncated } = outcome;
  if (outcome.stopped !== undefined) {
    const why = outcome.stopped === "timeout" ? `ran past its time limit of ${limit} ms` : "was cancelled";
    throw new ToolFailure(outcome.stopped, `the command ${why}; its processes were killed`, { stdout, stderr, truncated: String(truncated) });
  }
  return { exitCode, stdout, stderr, truncated };
}

/** `{path}` -> `{content, truncated}`: the file's start, as UTF-8 text, up to the output limit. */
async function readFile(input: JsonValue, context: ToolContext): Promise<JsonValue> {
  const relative = stringField(inputObject(input), "path");
  const { content, truncated } = await readInWorkspace(context.workspace, relative, context.outputLimit);
  return { content: content.toString("utf8"), truncated };
}

/** `{path, content}` -> `{bytes}`: the file is made or replaced with `content` as UTF-8. */
async function writeFile(input: JsonValue, context: ToolContext): Promise<JsonValue> {
  const fields = inputObject(input);
  const relative = stringField(fields, "path");
  const content = Buffer.from(stringField(fields, "content"), "utf8");
  return { bytes: await writeInWorkspace(context.workspace, relative, content) };
}

function earliest(...limits: (number | undefined)[]): number | undefined {
  const defined = limits.filter((limit) => limit !== undefined);
  return defined.length === 0 ? undefined : Math.min(...defined);
}

function isObject(value: JsonValue): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function inputObject(input: JsonValue): JsonObject {
  if (!isObject(input)) throw new ToolFailure("invalid_input", "the input must be a JSON object");
  return input;
}

function stringField(fields: JsonObject, name: string): string {
  const value = fields[name];
  if (typeof value !== "string") throw new ToolFailure("invalid_input", `"${name}" must be a string`);
  return value;
}

function optionalTimeout(fields: JsonObject): number | undefined {
  const value = fields.timeoutMs;
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value <= 0) throw new ToolFailure("invalid_input", `"timeoutMs" must be a positive integer`);
  return value;
}
