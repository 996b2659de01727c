import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import type { ArtifactService } from "../../gen/skillenv/env/v1/artifacts_pb.js";
import type { AssetService } from "../../gen/skillenv/assets/v1/assets_pb.js";
import { uploadAsset, type FetchFunction } from "../assets.ts";
import { sha256Hex } from "../bundle/index.ts";
import { oncePerInstance } from "../once-per-instance.ts";
import type { ComponentBytes, Program, ResolvedProgram } from "./program.ts";

/**
 * Components up to this size are offered inline in the admission call, which saves the upload's
 * round trips; larger ones go as an asset. The server's inline limit (SERVICE_ENV_MAX_INLINE_BYTES)
 * may be lower: the client learns it from the refusal and sends the component as an asset.
 */
const PREFERRED_INLINE_BYTES = 4 * 1024 * 1024;

export interface PrepareRequest {
  agentloops?: string[];
  programs?: string[];
  tools?: string[];
}

export interface EnvClient {
  /** Admits the program's source (and runtime component, when given as bytes) unless already admitted. */
  resolve(program: Program): Promise<ResolvedProgram>;
  /** Resolves the program, then loads its runtime on every worker (spec §4.3). */
  prepare(program: Program): Promise<ResolvedProgram>;
  /** Loads already admitted artifacts on every worker. */
  prepareIds(request: PrepareRequest): Promise<void>;
  /** Admits a component unless already admitted; returns its id. */
  admitComponent(component: ComponentBytes): Promise<string>;
}

/**
 * Resolutions are cached per (program instance, client), like skill uploads. Admission is always
 * checked before uploading (spec §4.4 rule 5), so a fresh client re-sends nothing the server has.
 */
export function createEnvClient(artifacts: Client<typeof ArtifactService>, assets: Client<typeof AssetService>, fetchFn: FetchFunction): EnvClient {
  /** The largest component this client still sends inline: lowered by each refusal of an inline admission. */
  let inlineLimit = PREFERRED_INLINE_BYTES;

  async function admitComponent(component: ComponentBytes): Promise<string> {
    const id = await sha256Hex(component.bytes);
    if (await isAdmitted(() => (component.kind === "tool" ? artifacts.getTool({ id }) : artifacts.getAgentLoop({ id })))) return id;
    if (component.bytes.byteLength <= inlineLimit) {
      try {
        return await admit(component.kind, { component: { contentType: "application/wasm", data: component.bytes } });
      } catch (error) {
        const serverLimit = inlineRefusalLimit(error, component.bytes.byteLength);
        if (serverLimit === undefined) throw error;
        inlineLimit = Math.min(inlineLimit, serverLimit);
      }
    }
    await uploadAsset(assets, component.bytes, fetchFn, id);
    return admit(component.kind, { assetSha256: id });
  }

  async function admit(kind: ComponentBytes["kind"], request: AdmitRequest): Promise<string> {
    return (kind === "tool" ? await artifacts.admitTool(request) : await artifacts.admitAgentLoop(request)).id;
  }

  async function runtimeOf(runtime: Program["runtime"]): Promise<{ id: string; entrypoint: "turn" | "run" }> {
    if (typeof runtime !== "string") {
      return { id: await admitComponent(runtime), entrypoint: runtime.kind === "agentloop" ? "turn" : "run" };
    }
    if (await isAdmitted(() => artifacts.getAgentLoop({ id: runtime }))) return { id: runtime, entrypoint: "turn" };
    if (await isAdmitted(() => artifacts.getTool({ id: runtime }))) return { id: runtime, entrypoint: "run" };
    throw new Error(`runtime ${runtime} is not admitted as an agent loop or a tool in this workspace`);
  }

  async function admitSource(source: Uint8Array): Promise<string> {
    const id = await sha256Hex(source);
    if (await isAdmitted(() => artifacts.getProgram({ id }))) return id;
    const text = new TextDecoder("utf-8", { fatal: true }).decode(source);
    return (await artifacts.admitProgram({ source: text })).id;
  }

  async function resolveOnce(program: Program): Promise<ResolvedProgram> {
    const [runtime, id] = await Promise.all([runtimeOf(program.runtime), readSource(program.source, fetchFn).then(admitSource)]);
    return { type: "service_program", entrypoint: runtime.entrypoint, id, runtime: runtime.id, configuration: program.configuration };
  }

  const client: EnvClient = {
    resolve: oncePerInstance(resolveOnce),
    async prepare(program) {
      const resolved = await client.resolve(program);
      const runtimeField = resolved.entrypoint === "turn" ? "agentloops" : "tools";
      await client.prepareIds({ programs: [resolved.id], [runtimeField]: [resolved.runtime] });
      return resolved;
    },
    async prepareIds(request) {
      await artifacts.prepare({ agentloops: request.agentloops ?? [], programs: request.programs ?? [], tools: request.tools ?? [] });
    },
    admitComponent,
  };
  return client;
}

type AdmitRequest = { component: { contentType: string; data: Uint8Array } } | { assetSha256: string };

/** When the server refused an inline admission as component_too_large: the most it takes inline (its maxBytes). */
function inlineRefusalLimit(error: unknown, sizeBytes: number): number | undefined {
  const info = ConnectError.from(error).findDetails(ErrorInfoSchema)[0];
  if (info?.reason !== "component_too_large") return undefined;
  return Number(info.metadata.maxBytes ?? sizeBytes - 1);
}

async function isAdmitted(lookup: () => Promise<unknown>): Promise<boolean> {
  try {
    await lookup();
    return true;
  } catch (error) {
    if (ConnectError.from(error).code === Code.NotFound) return false;
    throw error;
  }
}

interface NodeProcess {
  getBuiltinModule?(id: "node:fs/promises"): { readFile(path: URL): Promise<Uint8Array> } | undefined;
}

async function readSource(source: URL | Uint8Array, fetchFn: FetchFunction): Promise<Uint8Array> {
  if (source instanceof Uint8Array) return source;
  if (source.protocol === "file:") {
    const fs = (globalThis as { process?: NodeProcess }).process?.getBuiltinModule?.("node:fs/promises");
    if (!fs) throw new Error("file: URLs need a filesystem runtime (Node)");
    return fs.readFile(source);
  }
  const response = await fetchFn(source.href, {});
  if (!response.ok) throw new Error(`fetching the program source failed: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}
