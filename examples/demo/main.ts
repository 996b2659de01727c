/**
 * `npm run demo`: the whole service in one command, offline.
 *
 * Starts the service (`node server/src/main.ts`, as `npm start` does) on a temporary data
 * directory, with the scripted model provider standing in for Anthropic. Then, through the
 * TypeScript client: uploads the release-notes skill (examples/skills/release-notes), creates a
 * session with a service environment and two tools (a file tool, a word-count program), plus a
 * host environment, this process, serving a third (a clock), and runs it. The scripted model
 * lists the skills, loads one, reads its template with the file tool and today's date with the
 * clock, counts words with the program, and answers. The run's events print as a transcript.
 * Everything it started is stopped and removed before it exits: 0 when the run completed.
 */
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { buildComponents } from "../../scripts/build-components.ts";
import { startScriptedProvider } from "../../testing/scripted-provider/index.ts";
import {
  createNodeTransport,
  createServiceClient,
  hostEnv,
  program,
  serviceEnv,
  Skill,
  tool,
  type HostEnvironmentDefinition,
  type RunModel,
  type ServiceEnvironmentDefinition,
  type Session,
  type ToolPlacement,
} from "@skillenv/client/node";
import { demoScript } from "./model-script.ts";
import { startServiceProcess, type ServiceProcess } from "./service.ts";
import { outcomeLine, Transcript } from "./transcript.ts";

const ROOT = path.resolve(import.meta.dirname, "../..");
const SKILL_DIR = path.join(ROOT, "examples", "skills", "release-notes");
const CHANGES = path.join(import.meta.dirname, "CHANGES.md");
const WORD_COUNT = new URL("./word-count.js", import.meta.url);
/** The components the demo's tools run on (components/), built into build/components/ unless current. */
const WORKSPACE_JS = "workspace-js";
const PROGRAM_RUNTIME = "js-program-tool";
interface Components {
  /** A file tool over the granted /workspace. */
  workspaceJs: Uint8Array;
  /** The runtime of JavaScript tool programs. */
  programRuntime: Uint8Array;
}
/** A real model name: with a real key and the real API, the same submission reaches Claude. */
const MODEL: RunModel = { provider: "anthropic", name: "claude-sonnet-4-6" };
/** The scripted provider takes any key; a real one would go here (docs/runs.md). */
const PROVIDER_KEYS = { anthropic: "offline-demo-key" };

/** What was started, to stop and remove in reverse order, once, however the demo ends. */
class Cleanup {
  readonly #steps: Array<() => Promise<unknown>> = [];
  #done: Promise<void> | undefined;

  add(step: () => Promise<unknown>): void {
    this.#steps.push(step);
  }

  run(): Promise<void> {
    this.#done ??= (async () => {
      for (const step of this.#steps.reverse()) await step().catch((error: unknown) => console.error(`cleanup: ${(error as Error).message}`));
    })();
    return this.#done;
  }
}

async function demo(cleanup: Cleanup): Promise<void> {
  console.log("skillenv demo: offline, a scripted model stands in for Anthropic\n");
  const components = await buildDemoComponents();
  const service = await startServices(cleanup);
  try {
    await runSession(service, components, cleanup);
  } catch (error) {
    if (error instanceof RunNotCompleted) throw error;
    // What the client saw is half the story when the service itself went wrong.
    throw new Error(`${(error as Error).message}\n\nThe service's output:\n${service.output().trim()}`, { cause: error });
  }
}

/** The scripted provider, then the service pointed at it, on a temporary data directory. */
async function startServices(cleanup: Cleanup): Promise<ServiceProcess> {
  const tmp = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-demo-")));
  cleanup.add(() => fs.rm(tmp, { recursive: true, force: true }));
  const provider = await startScriptedProvider({ scripts: { [MODEL.name]: { steps: demoScript(today().date) } } });
  cleanup.add(() => provider.close());
  const service = await startServiceProcess({
    dataDir: path.join(tmp, "data"),
    workspaceRoot: path.join(tmp, "workspaces"),
    anthropicBaseUrl: provider.anthropicBaseUrl,
    openaiBaseUrl: provider.openaiBaseUrl,
  });
  cleanup.add(() => service.stop());
  setting("service", `${service.url} (data in ${tmp})`);
  setting("model", `${MODEL.provider} ${MODEL.name}, scripted at ${provider.url}`);
  return service;
}

/** What a user of the client writes: upload a skill, create a session, run it, follow its events. */
async function runSession(service: ServiceProcess, components: Components, cleanup: Cleanup): Promise<void> {
  // HTTP/2, so that the host environment holds one bidirectional command stream.
  const client = createServiceClient(createNodeTransport({ baseUrl: service.url, apiKey: service.apiKey, httpVersion: "2" }));
  const skill = await client.skills.upload(Skill.fromDir(SKILL_DIR));
  setting("skill", `${skill.name} uploaded (${skill.metadata.fileCount} files, sha256 ${skill.contentHash.slice(0, 12)}…)`);
  const sandbox = serviceEnv({ name: "sandbox", filesystem: { workspace: "write" } });
  const laptop = hostEnv({ name: "laptop", tools: { clock: today } });
  // Served from here as soon as the session exists: create answers once the host is connected.
  const session = await client.sessions.create({ environments: [sandbox, laptop], tools: [...demoTools(sandbox, components), clockTool(laptop)] });
  cleanup.add(() => stopHosts(session));
  setting(
    "session",
    `${session.id}: environments sandbox (workspace: write) and laptop (this process), tools ${session.record.tools.map(({ name }) => name).join(", ")}`,
  );

  const run = await session.run({
    message: "Write the release notes for acme-cli 2.4.0 from CHANGES.md.",
    model: MODEL,
    skills: [skill],
    files: [{ path: "CHANGES.md", bytes: await fs.readFile(CHANGES) }],
    providerKeys: PROVIDER_KEYS,
  });
  console.log(`\nTranscript of ${run.id}:\n`);
  const transcript = new Transcript();
  for await (const event of run.events()) console.log(transcript.line(event));
  const result = await run.result();
  if (result.status !== "completed") throw new RunNotCompleted(`the run ended ${outcomeLine(result)}`);
  console.log(`\nAnswer:\n\n${result.outputText}\n\n${outcomeLine(result)}`);
}

/** The service did its job; the run it ran did not complete (the transcript says why). */
class RunNotCompleted extends Error {
  override name = "RunNotCompleted";
}

/** Builds the demo's components (a no-op when their build is current) and reads them. */
async function buildDemoComponents(): Promise<Components> {
  const built = await buildComponents({ dirs: [WORKSPACE_JS, PROGRAM_RUNTIME].map((name) => path.join(ROOT, "components", name)), log: () => undefined });
  setting("components", built.map(({ name, rebuilt }) => `${name} (${rebuilt ? "built" : "current"})`).join(", "));
  const read = (name: string) => fs.readFile(built.find((component) => component.name === name)!.path);
  return { workspaceJs: await read(WORKSPACE_JS), programRuntime: await read(PROGRAM_RUNTIME) };
}

/** A file tool (the workspace-js component) and a word counter (a program on the JavaScript tool runtime). */
function demoTools(sandbox: ServiceEnvironmentDefinition, components: Components): ToolPlacement[] {
  const files = tool({
    name: "files",
    description: 'Reads, writes and lists files: {"v":1,"op":"read"|"write"|"list","path":"/workspace/...","data"?:"text to write"}.',
    inputSchema: {
      type: "object",
      properties: { v: { const: 1 }, op: { enum: ["read", "write", "list"] }, path: { type: "string" }, data: { type: "string" } },
      required: ["v", "op", "path"],
    },
    environment: sandbox,
    implementation: { kind: "tool", bytes: components.workspaceJs },
  });
  const wordCount = tool({
    name: "word_count",
    description: "Counts the words, lines and characters of a text.",
    inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
    environment: sandbox,
    implementation: program({ runtime: { kind: "tool", bytes: components.programRuntime }, source: WORD_COUNT }),
  });
  return [files, wordCount];
}

/** A tool only this process can answer: the date and time zone of the machine the demo runs on. */
function clockTool(laptop: HostEnvironmentDefinition): ToolPlacement {
  return tool({
    name: "clock",
    description: "Today's date (YYYY-MM-DD) and the time zone of the user's machine.",
    inputSchema: { type: "object" },
    environment: laptop,
  });
}

function today(): { date: string; timeZone: string } {
  const timeZone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  // The en-CA locale writes dates as YYYY-MM-DD.
  return { date: new Intl.DateTimeFormat("en-CA", { timeZone }).format(new Date()), timeZone };
}

/** A served host keeps its stream open, and would reconnect to a stopped service for ever. */
async function stopHosts(session: Session): Promise<void> {
  await Promise.all([...session.hosts.values()].map((host) => host.stop()));
}

function setting(name: string, value: string): void {
  console.log(`  ${name.padEnd(11)} ${value}`);
}

const cleanup = new Cleanup();
// Interrupted, it still stops what it started and removes its directory.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => void cleanup.run().finally(() => process.exit(128 + os.constants.signals[signal])));
}
try {
  await demo(cleanup);
} catch (error) {
  console.error(`\ndemo failed: ${(error as Error).message}`);
  process.exitCode = 1;
} finally {
  await cleanup.run();
}
