import { toJson, toJsonString, type DescMessage, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { ImplementationSchema } from "../../../gen/skillenv/sessions/v1/common_pb.js";
import {
  ExtensionEnvironmentSchema,
  HostEnvironmentSchema,
  ServiceEnvironmentSchema,
  type CreateSessionRequest,
  type Environment,
  type ToolPlacement,
} from "../../../gen/skillenv/sessions/v1/sessions_pb.js";
import type { BindingContext, EnvironmentKindName, EnvironmentKinds } from "../environments/index.ts";
import { serviceError } from "../errors/index.ts";
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
};

export interface SessionSpec {
  environments: EnvironmentRecord[];
  tools: ToolRecord[];
}

/**
 * Validates a CreateSessionRequest and asks each environment kind to authorize its options and
 * check the implementations placed in it. Every problem is a service error naming the
 * environment or tool; nothing is created by this function.
 */
export async function checkSessionSpec(request: CreateSessionRequest, context: Omit<BindingContext, "environment">, kinds: EnvironmentKinds): Promise<SessionSpec> {
  if (request.environments.length > MAX_ENVIRONMENTS) invalid(`a session binds at most ${MAX_ENVIRONMENTS} environments`);
  if (request.tools.length > MAX_TOOLS) invalid(`a session places at most ${MAX_TOOLS} tools`);
  const environments: EnvironmentRecord[] = [];
  for (const environment of request.environments) {
    if (environments.some((known) => known.name === environment.name)) invalid(`environment ${environment.name} is named twice`);
    environments.push(await checkEnvironment(environment, context, kinds));
  }
  const tools: ToolRecord[] = [];
  for (const placement of request.tools) {
    if (tools.some((known) => known.name === placement.name)) invalid(`tool ${placement.name} is placed twice`);
    tools.push(await checkPlacement(placement, environments, context, kinds));
  }
  return { environments, tools };
}

async function checkEnvironment(environment: Environment, context: Omit<BindingContext, "environment">, kinds: EnvironmentKinds): Promise<EnvironmentRecord> {
  const { name } = environment;
  if (!ENVIRONMENT_NAME.test(name)) invalid(`environment name ${JSON.stringify(name)} must match ${ENVIRONMENT_NAME.source}`);
  const setup = environment.setup || "automatic";
  if (setup !== "automatic" && setup !== "manual") invalid(`environment ${name}: setup must be "automatic" or "manual"`);
  const { case: kindName, value } = environment.kind;
  if (kindName === undefined) invalid(`environment ${name} needs a kind: service, host or extension`);
  const kind = kinds[kindName];
  const options = await kind.authorize({ ...context, environment: name }, toJson(KIND_SCHEMAS[kindName], value));
  return { name, setup, state: "pending", kind: kindName, options };
}

async function checkPlacement(placement: ToolPlacement, environments: EnvironmentRecord[], context: Omit<BindingContext, "environment">, kinds: EnvironmentKinds): Promise<ToolRecord> {
  const { name } = placement;
  if (!TOOL_NAME.test(name) || name.includes("__")) invalid(`tool name ${JSON.stringify(name)} must match ${TOOL_NAME.source} without "__"`);
  if (name === SKILLS_TOOL_NAME) invalid(`tool name "${SKILLS_TOOL_NAME}" is reserved for the skills meta-tool`);
  if (placement.description.length > MAX_TOOL_DESCRIPTION_CHARS) invalid(`tool ${name}: the description exceeds ${MAX_TOOL_DESCRIPTION_CHARS} characters`);
  const environment = environments.find((known) => known.name === placement.environment);
  if (!environment) invalid(`tool ${name} is placed in environment ${JSON.stringify(placement.environment)}, which the session does not bind`);
  const kind = kinds[environment.kind];
  const implementation = placement.implementation ? (toJson(ImplementationSchema, placement.implementation) as JsonValue) : undefined;
  return {
    name,
    description: placement.description,
    inputSchema: JSON.stringify(placement.inputSchema ?? { type: "object" }),
    environment: environment.name,
    implementation: await kind.checkImplementation({ ...context, environment: environment.name }, implementation),
    configuration: placement.configuration ? toJsonString(ValueSchema, placement.configuration) : "{}",
  };
}

function invalid(message: string): never {
  throw serviceError("invalid_argument", message);
}
