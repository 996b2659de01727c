import { toJson, toJsonString, type DescMessage, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { ImplementationSchema } from "../../../gen/skillenv/sessions/v1/common_pb.js";
import {
  ExtensionEnvironmentSchema,
  HostEnvironmentSchema,
  McpEnvironmentSchema,
  ServiceEnvironmentSchema,
  type CreateSessionRequest,
  type Environment,
  type ToolPlacement,
} from "../../../gen/skillenv/sessions/v1/sessions_pb.js";
import type { BindingContext, DiscoveredTool, EnvironmentKindName, EnvironmentKinds } from "../environments/index.ts";
import { isMcpEnvironmentName } from "@skillenv/client/mcp";
import { serviceError } from "../errors/index.ts";
import { checkJsonSize, checkTextChars, checkTextSize, FIELD_SETTING } from "./field-limits.ts";
import type { EnvironmentRecord, ToolRecord } from "./records.ts";

/** Environment names: one path segment, safe in directory names and URLs. */
const ENVIRONMENT_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
/** Model-facing tool names (the providers' function-name rule). */
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
/** The name of the skills meta-tool a run injects (SPEC 4.2): never a placement's. */
export const SKILLS_TOOL_NAME = "skills";
export const MAX_ENVIRONMENTS = 32;
export const MAX_TOOLS = 256;
export const MAX_TOOL_DESCRIPTION_CHARS = 4096;

/** The message of each kind's options: their proto JSON is what the kind authorizes and describes. */
export const KIND_SCHEMAS: Record<EnvironmentKindName, DescMessage> = {
  service: ServiceEnvironmentSchema,
  host: HostEnvironmentSchema,
  extension: ExtensionEnvironmentSchema,
  mcp: McpEnvironmentSchema,
};

export interface SessionSpec {
  environments: EnvironmentRecord[];
  tools: ToolRecord[];
}

/** How large what a session stores may be (docs/operations.md). */
export interface SessionSizeLimits {
  /** SERVICE_MAX_FIELD_BYTES: each caller-given value (a tool's inputSchema, configuration, implementation; an environment's options). */
  maxFieldBytes: number;
  /** SERVICE_SESSION_MAX_BYTES: the environments and tools together, as stored. */
  sessionMaxBytes: number;
}

/**
 * Validates a CreateSessionRequest and asks each environment kind to authorize its options and
 * check the implementations placed in it. Every problem is a service error naming the
 * environment or tool (field_too_large naming the field for a value above its limit); nothing
 * is created by this function.
 */
export async function checkSessionSpec(
  request: CreateSessionRequest,
  context: Omit<BindingContext, "environment">,
  kinds: EnvironmentKinds,
  limits: SessionSizeLimits,
): Promise<SessionSpec> {
  if (request.environments.length > MAX_ENVIRONMENTS) invalid(`a session binds at most ${MAX_ENVIRONMENTS} environments`);
  if (request.tools.length > MAX_TOOLS) invalid(`a session places at most ${MAX_TOOLS} tools`);
  const environments: EnvironmentRecord[] = [];
  for (const [index, environment] of request.environments.entries()) {
    if (environments.some((known) => known.name === environment.name)) invalid(`environment ${environment.name} is named twice`);
    environments.push(await checkEnvironment(environment, `environments[${index}]`, context, kinds, limits));
  }
  const tools: ToolRecord[] = [];
  for (const [index, placement] of request.tools.entries()) {
    if (tools.some((known) => known.name === placement.name)) invalid(`tool ${placement.name} is placed twice`);
    tools.push(await checkPlacement(placement, `tools[${index}]`, environments, context, kinds, limits));
  }
  const spec = { environments, tools };
  // Each field is bounded, but 256 tools of bounded fields are not: the whole is, as it is stored.
  checkJsonSize("session", spec, limits.sessionMaxBytes, "SERVICE_SESSION_MAX_BYTES");
  return spec;
}

async function checkEnvironment(
  environment: Environment,
  field: string,
  context: Omit<BindingContext, "environment">,
  kinds: EnvironmentKinds,
  limits: SessionSizeLimits,
): Promise<EnvironmentRecord> {
  const { name } = environment;
  if (!ENVIRONMENT_NAME.test(name)) invalid(`environment name ${JSON.stringify(name)} must match ${ENVIRONMENT_NAME.source}`);
  const setup = environment.setup || "automatic";
  if (setup !== "automatic" && setup !== "manual") invalid(`environment ${name}: setup must be "automatic" or "manual"`);
  const { case: kindName, value } = environment.kind;
  if (kindName === undefined) invalid(`environment ${name} needs a kind: service, host, extension or mcp`);
  const kind = kinds[kindName];
  const requested = toJson(KIND_SCHEMAS[kindName], value) as Record<string, JsonValue>;
  // Before the kind reads them: a service environment's grants, an extension's or MCP server's url, credential and the rest.
  for (const [option, optionValue] of Object.entries(requested))
    checkJsonSize(`${field}.${kindName}.${option}`, optionValue, limits.maxFieldBytes, FIELD_SETTING);
  const options = await kind.authorize({ ...context, environment: name }, requested);
  return { name, setup, state: "pending", kind: kindName, options };
}

async function checkPlacement(
  placement: ToolPlacement,
  field: string,
  environments: EnvironmentRecord[],
  context: Omit<BindingContext, "environment">,
  kinds: EnvironmentKinds,
  limits: SessionSizeLimits,
): Promise<ToolRecord> {
  const { name } = placement;
  if (!TOOL_NAME.test(name)) invalid(`tool name ${JSON.stringify(name)} must match ${TOOL_NAME.source}`);
  if (name === SKILLS_TOOL_NAME) invalid(`tool name "${SKILLS_TOOL_NAME}" is reserved for the skills meta-tool`);
  checkTextChars(`${field}.description`, placement.description, MAX_TOOL_DESCRIPTION_CHARS);
  const environment = environments.find((known) => known.name === placement.environment);
  if (!environment) invalid(`tool ${name} is placed in environment ${JSON.stringify(placement.environment)}, which the session does not bind`);
  if (name.includes("__") && !isBridgedMcpTool(name, environment))
    invalid(
      `tool name ${JSON.stringify(name)} contains "__", which is reserved for MCP tools: only a host environment's tool may have it, named ${JSON.stringify(`${environment.name}__<tool>`)}`,
    );
  const kind = kinds[environment.kind];
  const inputSchema = JSON.stringify(placement.inputSchema ?? { type: "object" });
  checkTextSize(`${field}.inputSchema`, inputSchema, limits.maxFieldBytes, FIELD_SETTING);
  const configuration = placement.configuration ? toJsonString(ValueSchema, placement.configuration) : "{}";
  checkTextSize(`${field}.configuration`, configuration, limits.maxFieldBytes, FIELD_SETTING);
  if (!["", "never", "always"].includes(placement.approval))
    invalid(`${field}.approval must be "always" or "never" (the default), not ${JSON.stringify(placement.approval)}`);
  const implementation = placement.implementation ? (toJson(ImplementationSchema, placement.implementation) as JsonValue) : undefined;
  if (implementation !== undefined) checkJsonSize(`${field}.implementation`, implementation, limits.maxFieldBytes, FIELD_SETTING);
  return {
    name,
    description: placement.description,
    inputSchema,
    environment: environment.name,
    implementation: await kind.checkImplementation({ ...context, environment: environment.name }, implementation),
    configuration,
    ...(placement.approval === "always" ? { approval: "always" as const } : {}),
  };
}

/**
 * The session's tools once environment `environment`'s setup discovered `discovered` (an MCP
 * server's): its earlier ones replaced, the rest kept. The same limits hold as at creation (the
 * number of tools, each inputSchema, the whole as stored); a name already placed is refused.
 */
export function withDiscoveredTools(spec: SessionSpec, environment: string, discovered: DiscoveredTool[], limits: SessionSizeLimits): ToolRecord[] {
  const kept = spec.tools.filter((tool) => tool.environment !== environment);
  if (kept.length + discovered.length > MAX_TOOLS)
    invalid(`a session places at most ${MAX_TOOLS} tools; environment ${environment} offers ${discovered.length}`);
  const tools = [...kept];
  for (const tool of discovered) {
    if (tools.some((known) => known.name === tool.name)) invalid(`tool ${tool.name} of environment ${environment} is placed already`);
    checkTextSize(`${environment}.tools[${tool.name}].inputSchema`, tool.inputSchema, limits.maxFieldBytes, FIELD_SETTING);
    tools.push({ ...tool, environment, configuration: "{}" });
  }
  checkJsonSize("session", { environments: spec.environments, tools }, limits.sessionMaxBytes, "SERVICE_SESSION_MAX_BYTES");
  return tools;
}

/**
 * `__` is reserved for MCP tools (SPEC 2.1). A host environment may serve an MCP server's tools
 * (the TypeScript client's stdio bridge, docs/mcp.md), which it places by the MCP environments'
 * rule, `<environment>__<tool>`: so the part before the first `__` is the environment's, whose name
 * then has no `__` of its own, and no two environments' tools can share a name.
 */
function isBridgedMcpTool(name: string, environment: EnvironmentRecord): boolean {
  return environment.kind === "host" && isMcpEnvironmentName(environment.name) && name.startsWith(`${environment.name}__`);
}

function invalid(message: string): never {
  throw serviceError("invalid_argument", message);
}
