import { ConnectError } from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { parseArgs } from "node:util";
import { ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { BundleFormatError } from "./bundle/index.ts";
import { UploadError } from "./assets.ts";
import { createNodeTransport, createServiceClient, Skill, SkillSourceError, type ServiceClient } from "./node.ts";
import { toJson } from "@bufbuild/protobuf";
import { SkillSchema, SkillVersionSchema, type Skill as SkillMetadata, type SkillVersion } from "../gen/skillenv/skills/v1/skills_pb.js";

const USAGE = `usage: skillenv <command> [options]

commands:
  upload <dir> [--name <name>]                 upload a skill directory and bind it by name
  list [--page-size <n>] [--page-token <t>]    list the workspace's skills (metadata)
  get <name> [--version <n>]                   show one skill's metadata (or one version's)
  delete <name>                                delete a skill
  versions <name> [--page-size <n>] [--page-token <t>]
                                               list a skill's versions, newest first
  rollback <name> <version>                    bind the name to an earlier version's content again

environment:
  SERVICE_URL       base URL of the service (default http://127.0.0.1:8080)
  SERVICE_API_KEY   API key of the workspace (required)
`;

class UsageError extends Error {}

/** Runs one command; output is JSON on stdout, errors are one line on stderr: `error <code>: <message>`. */
export async function runCli(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  try {
    const { positionals, values } = parseOptions(argv);
    if (values.help || positionals.length === 0) {
      process.stdout.write(USAGE);
      return values.help ? 0 : 2;
    }
    const [command, argument, ...rest] = positionals;
    const result = await runCommand(connect(env), command!, argument, rest, values);
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } catch (error) {
    process.stderr.write(`${describe(error)}\n`);
    return error instanceof UsageError ? 2 : 1;
  }
}

/** The command line's options and arguments; an option parseArgs refuses (unknown, or missing its value) is a usage error. */
function parseOptions(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        name: { type: "string" },
        "page-size": { type: "string" },
        "page-token": { type: "string" },
        version: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code === "string" && code.startsWith("ERR_PARSE_ARGS_")) throw new UsageError(`${(error as Error).message}\n${USAGE}`);
    throw error;
  }
}

function connect(env: NodeJS.ProcessEnv): ServiceClient {
  const apiKey = env.SERVICE_API_KEY;
  if (!apiKey) throw new UsageError("SERVICE_API_KEY is not set: export the workspace's API key");
  return createServiceClient(createNodeTransport({ baseUrl: env.SERVICE_URL ?? "http://127.0.0.1:8080", apiKey }));
}

type Options = { name?: string; "page-size"?: string; "page-token"?: string; version?: string };

async function runCommand(client: ServiceClient, command: string, argument: string | undefined, rest: string[], options: Options): Promise<unknown> {
  switch (command) {
    case "upload": {
      const uploaded = await client.skills.upload(Skill.fromDir(required(argument, "a skill directory"), { name: options.name }));
      return { ...metadataJson(uploaded.metadata), changed: uploaded.changed, bytesSent: uploaded.bytesSent };
    }
    case "list": {
      const page = await client.skills.list({ pageSize: pageSizeOf(options), pageToken: options["page-token"] });
      return { skills: page.skills.map(metadataJson), nextPageToken: page.nextPageToken };
    }
    case "get": {
      const name = required(argument, "a skill name");
      if (options.version === undefined) return metadataJson(await client.skills.get(name));
      return versionJson(await client.skills.get(name, { version: versionNumber(options.version, "--version") }));
    }
    case "versions": {
      const page = await client.skills.versions(required(argument, "a skill name"), { pageSize: pageSizeOf(options), pageToken: options["page-token"] });
      return { versions: page.versions.map(versionJson), nextPageToken: page.nextPageToken };
    }
    case "rollback": {
      const name = required(argument, "a skill name");
      const rolled = await client.skills.rollback(name, versionNumber(required(rest[0], "a version number"), "the version"));
      return { skill: metadataJson(rolled.skill), version: versionJson(rolled.version), changed: rolled.changed };
    }
    case "delete":
      await client.skills.delete(required(argument, "a skill name"));
      return { deleted: argument };
    default:
      throw new UsageError(`unknown command ${JSON.stringify(command)}\n${USAGE}`);
  }
}

function required(value: string | undefined, what: string): string {
  if (value === undefined) throw new UsageError(`missing argument: ${what}\n${USAGE}`);
  return value;
}

function pageSizeOf(options: Options): number | undefined {
  const pageSize = options["page-size"] === undefined ? undefined : Number(options["page-size"]);
  if (pageSize !== undefined && !Number.isInteger(pageSize)) throw new UsageError("--page-size must be an integer");
  return pageSize;
}

function versionNumber(value: string, what: string): number {
  if (!/^[1-9][0-9]{0,9}$/.test(value)) throw new UsageError(`${what} must be a version number (1 or more), got ${JSON.stringify(value)}`);
  return Number(value);
}

function metadataJson(skill: SkillMetadata): object {
  return toJson(SkillSchema, skill) as object;
}

function versionJson(version: SkillVersion): object {
  return toJson(SkillVersionSchema, version) as object;
}

function describe(error: unknown): string {
  if (error instanceof UsageError) return error.message;
  if (error instanceof ConnectError) return `error ${connectCodeOf(error)}: ${error.rawMessage}`;
  if (error instanceof BundleFormatError || error instanceof UploadError || error instanceof SkillSourceError) {
    return `error ${error.code}: ${error.message}`;
  }
  return `error unknown: ${error instanceof Error ? error.message : String(error)}`;
}

/** The service's stable code; without one (the server unreachable, say), the Connect code's name. */
function connectCodeOf(error: ConnectError): string {
  return error.findDetails(ErrorInfoSchema)[0]?.reason ?? codeToString(error.code);
}
