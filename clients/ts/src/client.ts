import { createClient, type Client, type Transport } from "@connectrpc/connect";
import { AssetService } from "../gen/skillenv/assets/v1/assets_pb.js";
import { ArtifactService } from "../gen/skillenv/env/v1/artifacts_pb.js";
import { HostService } from "../gen/skillenv/env/v1/host_pb.js";
import { RunService } from "../gen/skillenv/sessions/v1/runs_pb.js";
import { SessionService } from "../gen/skillenv/sessions/v1/sessions_pb.js";
import { SkillService } from "../gen/skillenv/skills/v1/skills_pb.js";
import { StatusService } from "../gen/skillenv/status/v1/status_pb.js";
import { uploadAsset, type FetchFunction, type UploadResult } from "./assets.ts";
import { DEFAULT_BUNDLE_LIMITS, type BundleLimits } from "./bundle/index.ts";
import { createEnvClient, type EnvClient } from "./env/index.ts";
import { DEFAULT_RECONNECT, hostStreamingOf, type HostDeps, type HostStreaming, type ReconnectOptions } from "./hosts/index.ts";
import type { RunsDeps } from "./runs/index.ts";
import { createImplementationResolver, createPrepare, createSessionsClient, type Prepare, type SessionsClient } from "./sessions/index.ts";
import { createSkillsClient, type SkillsClient } from "./skills/index.ts";

export interface ServiceClient {
  /** The generated AssetService client. */
  readonly assets: Client<typeof AssetService>;
  /** Uploads bytes as a workspace asset (presign, PUT, finalize). */
  uploadAsset(bytes: Uint8Array): Promise<UploadResult>;
  /** The workspace skill registry. */
  readonly skills: SkillsClient;
  /** Artifacts of the service environment: programs, components, preparation. */
  readonly env: EnvClient;
  /** Sessions: environments, the tools placed in them, tool calls, runs and the journal's events. */
  readonly sessions: SessionsClient;
  /** Admits a service-environment placement or program and loads it on every worker (spec §4.3). */
  readonly prepare: Prepare;
  /** The generated StatusService client: the workspace's sessions, runs of the last hour and share of the worker pool. */
  readonly status: Client<typeof StatusService>;
}

export interface ServiceClientOptions {
  /** For the signed PUT; defaults to the global fetch. */
  fetch?: FetchFunction;
  /**
   * The server's bundle limits (its SERVICE_SKILL_* settings); default the documented ones. Skill
   * uploads breaking them are refused before anything is sent.
   */
  bundleLimits?: BundleLimits;
  /** How host environments served through this client reach the service. */
  hosts?: HostOptions;
}

export interface HostOptions {
  /**
   * Default: "bidirectional" for a createNodeTransport over HTTP/2 or gRPC, "server-streaming"
   * for any other transport (createWebTransport in browsers, HTTP/1.1, transports made
   * elsewhere), which every transport can carry.
   */
  streaming?: HostStreaming;
  /** Backoff between attempts to open a dropped command stream again. */
  reconnect?: ReconnectOptions;
}

/** A typed client over any Connect transport (connect-node, connect-web, gRPC, gRPC-Web). */
export function createServiceClient(transport: Transport, options: ServiceClientOptions = {}): ServiceClient {
  const assets = createClient(AssetService, transport);
  const fetchFn = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const env = createEnvClient(createClient(ArtifactService, transport), assets, fetchFn);
  // One resolver for both, so an implementation prepared here is not admitted again by a session.
  const resolveImplementation = createImplementationResolver(env);
  const skills = createSkillsClient(createClient(SkillService, transport), assets, fetchFn, options.bundleLimits ?? DEFAULT_BUNDLE_LIMITS);
  const uploadBytes = (bytes: Uint8Array) => uploadAsset(assets, bytes, fetchFn);
  // Runs upload through the same skills client, so a skill uploaded explicitly is not uploaded again by a run,
  // and agent loops are admitted through the resolver tools use, so a component or program is admitted once for both.
  const runs: RunsDeps = {
    rpc: createClient(RunService, transport),
    uploads: {
      uploadSkill: (skill) => skills.upload(skill),
      uploadAsset: uploadBytes,
      admitAgentLoop: (implementation) => resolveImplementation(implementation, "agentloop"),
    },
  };
  const hosts: HostDeps = {
    rpc: createClient(HostService, transport),
    streaming: options.hosts?.streaming ?? hostStreamingOf(transport),
    reconnect: { ...DEFAULT_RECONNECT, ...options.hosts?.reconnect },
  };
  return {
    assets,
    uploadAsset: uploadBytes,
    skills,
    env,
    sessions: createSessionsClient(createClient(SessionService, transport), resolveImplementation, runs, hosts),
    prepare: createPrepare(env, resolveImplementation),
    status: createClient(StatusService, transport),
  };
}
