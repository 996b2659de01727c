import * as path from "node:path";
import { DEFAULT_BUNDLE_LIMITS } from "@skillenv/client/bundle";
import { POOL_DEFAULTS } from "../engine/pool/defaults.ts";
import { parseS3Url, type S3Location } from "../storage/index.ts";
import {
  parseAbsolutePaths,
  parseApiKeys,
  parseBoolean,
  parseDatabaseUrl,
  parseEnvNames,
  parseList,
  parseListen,
  parseOpenAIApi,
  parseOrigins,
  parsePositiveInt,
  parseOnOff,
  parseUrl,
  parseZeroOrPositiveInt,
  type ListenAddress,
} from "./parsers.ts";
import { readTracingSettings, type TracingSettings } from "./tracing.ts";

export interface Settings {
  listen: ListenAddress;
  /** Where Prometheus scrapes `GET /metrics`; undefined: no metrics. */
  metricsListen: ListenAddress | undefined;
  /** Where spans are exported, from the standard OpenTelemetry variables; undefined: no tracing (config/tracing.ts). */
  tracing: TracingSettings | undefined;
  dataDir: string;
  /** The S3-compatible bucket holding blobs, which clients upload to directly; undefined: files in the data directory. */
  blobStore: S3Location | undefined;
  /** The shared PostgreSQL database of the metadata; undefined: LevelDB in the data directory. Holds a password: never log it. */
  databaseUrl: string | undefined;
  /** API key -> workspace. Undefined means: use the development key in the data directory. */
  apiKeys: Map<string, string> | undefined;
  /** Base URL written into signed upload URLs; undefined means: the Host the client used. */
  publicUrl: string | undefined;
  tls: { certFile: string; keyFile: string } | undefined;
  corsOrigins: string[];
  logRequests: boolean;
  /** Longest line the service logs; longer entries have their strings cut. */
  logMaxLineBytes: number;
  /** Refused host receipts logged per workspace and minute; the rest are counted. */
  logHostRefusalsPerMin: number;
  shutdownGraceSecs: number;
  /** Each workspace's share of the server's requests (auth/workspace-rate.ts). */
  workspaceRates: WorkspaceRateSettings;
  limits: Limits;
  http: HttpLimits;
  env: EnvironmentSettings;
  sessions: SessionSettings;
  models: ModelSettings;
  replicas: ReplicaSettings;
}

/** Each workspace's share of the server's requests: a token bucket (auth/workspace-rate.ts). */
export interface WorkspaceRateSettings {
  /** Requests one workspace may make per second, on average; 0 turns the limit off. */
  requestsPerSec: number;
  /** Requests one workspace may make at once after a quiet spell (the bucket's size). */
  burst: number;
  /** How long a refusal is held before it is answered, at most (milliseconds; 0: answered at once). */
  holdMs: number;
  /** Refusals held at once per workspace; past them, refusals are answered at once. */
  maxHeld: number;
}

/** How replicas on a shared database find each other and own sessions (docs/operations.md, "Scaling"). */
export interface ReplicaSettings {
  /** This replica's stable name; undefined: the one kept in the data directory. */
  id: string | undefined;
  /** The base URL other replicas reach this one at; undefined: the listener's own URL. */
  address: string | undefined;
  /** How long a replica that stopped renewing still owns its sessions. */
  leaseSecs: number;
}

/** The model providers runs call (docs/models.md). */
export interface ModelSettings {
  anthropicBaseUrl: string;
  openaiBaseUrl: string;
  /** Which API the `openai` provider speaks at openaiBaseUrl. */
  openaiApi: OpenAIApi;
  /** Retries of a retryable failure before a reply starts streaming; 0 disables. */
  maxRetries: number;
  /** Bound on one model call, retries included. */
  timeoutSecs: number;
}

/**
 * OpenAI's Responses API, or Chat Completions, the one API every OpenAI-compatible server
 * (vLLM, Ollama, llama.cpp, gateways) speaks. Default: Responses at OpenAI's own API, Chat
 * Completions at any other base URL (docs/models.md).
 */
export type OpenAIApi = "responses" | "chat-completions";

/** Sessions and their journal. */
export interface SessionSettings {
  /** Largest tool input or output kept in the journal, as JSON text. */
  maxPayloadBytes: number;
  /** Deepest nesting of a tool input or output, or a model's tool call input, the service keeps (server/src/json). */
  maxJsonDepth: number;
  /** Progress one operation, or one run's custom agent loop, may journal; more is dropped. */
  progress: ProgressLimits;
  /** Largest free-form value a caller stores in a session or run (a tool's inputSchema, a run's model parameters, ...), as JSON text. */
  maxFieldBytes: number;
  /** Largest session: its environments and tools together, as stored (JSON text). */
  sessionMaxBytes: number;
  /** Records of sessions no request uses that stay in memory (JSON text), most recently used first. */
  sessionCacheBytes: number;
  /** Model calls per run, at most (the default of a run's max_rounds). */
  runMaxRounds: number;
  /** Finished runs (records, conversation, skill snapshots) are removed after this many days. */
  runRetentionDays: number;
  /** Whether a run the process stopped in resumes at the next start (its provider key sealed at rest meanwhile). */
  runResume: boolean;
  /** Commands one host connection may have in flight; more are refused (host_busy, nothing sent). */
  hostMaxInFlight: number;
  /** Messages queued for a host that does not read its stream; beyond, its connection is closed. */
  hostMaxQueued: number;
}

/**
 * The progress one operation (`operation.progress`) or one turn (`turn.progress`) may journal:
 * the first `maxEvents` events of at most `maxBytes` each; the rest are dropped and counted.
 */
export interface ProgressLimits {
  maxEvents: number;
  maxBytes: number;
}

export interface Limits {
  /** Largest body accepted by the signed upload URL. */
  maxUploadBytes: number;
  /** Largest body of an API request (JSON or raw). */
  maxRequestBytes: number;
  /** Largest body of a method that needs no key (the health service): anyone may send it. */
  maxPublicRequestBytes: number;
  /** A List method's page ends early, with a token, before the item that would pass this many bytes. */
  listMaxBytes: number;
  uploadUrlTtlSecs: number;
  skillMaxEntries: number;
  skillMaxEntryBytes: number;
  skillMaxTotalBytes: number;
  skillMaxCompressionRatio: number;
  /** Bundle validations (PutSkill, reading a skill's files) running at once; more wait their turn. */
  skillMaxConcurrentValidations: number;
  /** Versions kept per skill besides those a retained run used (the newest this many, the current one among them). */
  skillMaxVersions: number;
}

/** What connections and request bodies may hold of the server, so a slow or hostile caller cannot hold it all. */
export interface HttpLimits {
  /** Open connections at once; more are closed as they are accepted. */
  maxConnections: number;
  /** Streams one HTTP/2 connection may have open at once (advertised in SETTINGS). */
  maxConcurrentStreams: number;
  /** Time to say what a connection wants: TLS handshake, the first bytes on plaintext, HTTP/1.1 request headers. */
  headersTimeoutSecs: number;
  /** An HTTP/1.1 connection between requests, or an HTTP/2 connection without open streams, closes after this. */
  idleConnectionSecs: number;
  /** A request body that sends nothing for this long is abandoned and its connection closed. */
  bodyIdleSecs: number;
  /** Request body bytes held in memory at once, by all connections and by any one. */
  maxBodyBytesInFlight: number;
  maxConnectionBodyBytesInFlight: number;
}

/** Spec §8 deployment settings of the environments. */
export interface EnvironmentSettings {
  filesystemAllow: string[];
  networkAllow: string[];
  /** SERVICE_MCP_ALLOW: the origins an MCP environment's server may be at. */
  mcpAllow: string[];
  secretAllow: string[];
  /** Where the retained /workspace of each (session, service environment) lives; must be within filesystemAllow for workspace grants. */
  workspaceRoot: string;
  preparationFile: string | undefined;
  workers: number;
  maxTurnSecs: number;
  /** Fuel per invocation (guest computation units). */
  fuel: number;
  /** Cap on one guest's linear memory. */
  memoryMib: number;
  maxComponentBytes: number;
  /** Largest component accepted inline in a gRPC/Connect admission (larger ones go through assets). */
  maxInlineComponentBytes: number;
  maxSourceBytes: number;
  /** Concurrent agent-loop invocations per worker (nested-work capacity; they mostly wait). */
  agentLoopSlotsPerWorker: number;
  /** Concurrent leaf (tool) invocations per worker. */
  toolSlotsPerWorker: number;
  /** Tool and agent-loop slots one workspace may hold at once over the pool (default half the pool's, rounded up). */
  workspaceToolSlots: number;
  workspaceAgentLoopSlots: number;
  /** Workers one workspace's invocations may occupy at once (default half of them, rounded up). */
  workspaceWorkers: number;
  /** Invocations of one kind one workspace may have waiting for a slot. */
  queueLength: number;
  /** Fresh instances kept ready per recently used component per worker; 0 disables them. */
  spareInstances: number;
  /** Guest memory the spare instances of one worker may hold. */
  spareMemoryMib: number;
  /** Budget for compiled components (core module bytes); 0: unbounded, they stay for the pool's lifetime. */
  compiledMemoryMib: number;
  /** Each worker process in a bubblewrap sandbox (on), or contained by the engine's own checks only (off). */
  sandbox: boolean;
  /** Disk quota of each binding's /workspace, in bytes; 0: none. */
  workspaceQuotaBytes: number;
  /** Disk quota of each invocation's /scratch, in bytes. */
  scratchQuotaBytes: number;
}

export class SettingsError extends Error {
  override name = "SettingsError";
}

const MiB = 1024 * 1024;

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Reads every setting from the environment. All problems are reported at once, each naming the
 * setting and its accepted form, so an operator fixes a deployment in one pass.
 */
export function loadSettings(env: Env = process.env): Settings {
  const problems: string[] = [];
  function read<T>(name: string, parse: (raw: string) => T, fallback: T): T {
    const raw = env[name];
    if (raw === undefined || raw === "") return fallback;
    try {
      return parse(raw);
    } catch (error) {
      problems.push(`${name}: ${(error as Error).message}`);
      return fallback;
    }
  }

  const certFile = read("SERVICE_TLS_CERT", String, undefined);
  const keyFile = read("SERVICE_TLS_KEY", String, undefined);
  if ((certFile === undefined) !== (keyFile === undefined)) {
    problems.push("SERVICE_TLS_CERT, SERVICE_TLS_KEY: set both (PEM file paths) or neither");
  }

  const dataDir = path.resolve(read("SERVICE_DATA_DIR", String, "data"));
  const openaiBaseUrl = read("SERVICE_OPENAI_BASE_URL", parseUrl, "https://api.openai.com/v1");
  const settings: Settings = {
    listen: read("SERVICE_LISTEN", parseListen, { host: "127.0.0.1", port: 8080 }),
    metricsListen: read("SERVICE_METRICS_LISTEN", parseListen, undefined),
    tracing: readTracingSettings(env, problems),
    dataDir,
    blobStore: read("SERVICE_BLOB_URL", parseS3Url, undefined),
    databaseUrl: read("SERVICE_DATABASE_URL", parseDatabaseUrl, undefined),
    apiKeys: read("SERVICE_API_KEYS", parseApiKeys, undefined),
    publicUrl: read("SERVICE_PUBLIC_URL", parseUrl, undefined),
    tls: certFile !== undefined && keyFile !== undefined ? { certFile, keyFile } : undefined,
    corsOrigins: read("SERVICE_CORS_ORIGINS", parseList, []),
    logRequests: read("SERVICE_LOG_REQUESTS", parseBoolean, true),
    logMaxLineBytes: read("SERVICE_LOG_MAX_LINE_BYTES", parseLogLineBytes, 4096),
    logHostRefusalsPerMin: read("SERVICE_LOG_HOST_REFUSALS_PER_MIN", parsePositiveInt, 10),
    shutdownGraceSecs: read("SERVICE_SHUTDOWN_GRACE_SECS", parsePositiveInt, 10),
    workspaceRates: {
      requestsPerSec: read("SERVICE_WORKSPACE_REQUESTS_PER_SEC", parseZeroOrPositiveInt, 200),
      burst: read("SERVICE_WORKSPACE_REQUEST_BURST", parsePositiveInt, 0),
      holdMs: read("SERVICE_WORKSPACE_REFUSAL_HOLD_MS", parseZeroOrPositiveInt, 1000),
      maxHeld: read("SERVICE_WORKSPACE_MAX_HELD_REFUSALS", parsePositiveInt, 256),
    },
    limits: {
      maxUploadBytes: read("SERVICE_MAX_UPLOAD_BYTES", parsePositiveInt, 128 * MiB),
      maxRequestBytes: read("SERVICE_MAX_REQUEST_BYTES", parsePositiveInt, 32 * MiB),
      maxPublicRequestBytes: read("SERVICE_MAX_PUBLIC_REQUEST_BYTES", parsePositiveInt, 4096),
      listMaxBytes: read("SERVICE_LIST_MAX_BYTES", parsePositiveInt, 4 * MiB),
      uploadUrlTtlSecs: read("SERVICE_UPLOAD_URL_TTL_SECS", parsePositiveInt, 900),
      skillMaxEntries: read("SERVICE_SKILL_MAX_ENTRIES", parsePositiveInt, DEFAULT_BUNDLE_LIMITS.maxEntries),
      skillMaxEntryBytes: read("SERVICE_SKILL_MAX_ENTRY_BYTES", parsePositiveInt, DEFAULT_BUNDLE_LIMITS.maxEntryBytes),
      skillMaxTotalBytes: read("SERVICE_SKILL_MAX_TOTAL_BYTES", parsePositiveInt, DEFAULT_BUNDLE_LIMITS.maxTotalBytes),
      skillMaxCompressionRatio: read("SERVICE_SKILL_MAX_COMPRESSION_RATIO", parsePositiveInt, DEFAULT_BUNDLE_LIMITS.maxCompressionRatio),
      skillMaxConcurrentValidations: read("SERVICE_SKILL_MAX_CONCURRENT_VALIDATIONS", parsePositiveInt, 2),
      skillMaxVersions: read("SERVICE_SKILL_MAX_VERSIONS", parsePositiveInt, 20),
    },
    http: {
      maxConnections: read("SERVICE_MAX_CONNECTIONS", parsePositiveInt, 4096),
      maxConcurrentStreams: read("SERVICE_MAX_CONCURRENT_STREAMS", parsePositiveInt, 100),
      headersTimeoutSecs: read("SERVICE_HEADERS_TIMEOUT_SECS", parsePositiveInt, 10),
      idleConnectionSecs: read("SERVICE_IDLE_CONNECTION_SECS", parsePositiveInt, 30),
      bodyIdleSecs: read("SERVICE_BODY_IDLE_SECS", parsePositiveInt, 30),
      maxBodyBytesInFlight: read("SERVICE_MAX_BODY_BYTES_IN_FLIGHT", parsePositiveInt, 128 * MiB),
      maxConnectionBodyBytesInFlight: read("SERVICE_MAX_CONNECTION_BODY_BYTES_IN_FLIGHT", parsePositiveInt, 64 * MiB),
    },
    env: {
      filesystemAllow: read("SERVICE_ENV_FILESYSTEM_ALLOW", parseAbsolutePaths, []),
      networkAllow: read("SERVICE_ENV_NETWORK_ALLOW", parseOrigins, []),
      mcpAllow: read("SERVICE_MCP_ALLOW", parseOrigins, []),
      secretAllow: read("SERVICE_ENV_SECRET_ALLOW", parseEnvNames, []),
      workspaceRoot: read("SERVICE_ENV_WORKSPACE_ROOT", (raw) => path.resolve(raw), path.join(dataDir, "workspaces")),
      preparationFile: read("SERVICE_ENV_PREPARATION", (raw) => path.resolve(raw), undefined),
      workers: read("SERVICE_ENV_WORKERS", parsePositiveInt, 2),
      maxTurnSecs: read("SERVICE_MAX_TURN_SECS", parsePositiveInt, 300),
      fuel: read("SERVICE_ENV_FUEL", parsePositiveInt, 10_000_000_000),
      memoryMib: read("SERVICE_ENV_MEMORY_MIB", parsePositiveInt, 256),
      maxComponentBytes: read("SERVICE_ENV_MAX_COMPONENT_BYTES", parsePositiveInt, 64 * MiB),
      maxInlineComponentBytes: read("SERVICE_ENV_MAX_INLINE_BYTES", parsePositiveInt, 16 * MiB),
      maxSourceBytes: read("SERVICE_ENV_MAX_SOURCE_BYTES", parsePositiveInt, 1 * MiB),
      agentLoopSlotsPerWorker: read("SERVICE_ENV_AGENT_LOOP_SLOTS", parsePositiveInt, 16),
      toolSlotsPerWorker: read("SERVICE_ENV_TOOL_SLOTS", parsePositiveInt, 4),
      // Filled in below from the pool's size when not set.
      workspaceToolSlots: read("SERVICE_ENV_WORKSPACE_TOOL_SLOTS", parsePositiveInt, 0),
      workspaceAgentLoopSlots: read("SERVICE_ENV_WORKSPACE_AGENT_LOOP_SLOTS", parsePositiveInt, 0),
      workspaceWorkers: read("SERVICE_ENV_WORKSPACE_WORKERS", parsePositiveInt, 0),
      // 0: nothing waits, a call without a free slot is refused at once.
      queueLength: read("SERVICE_ENV_QUEUE_LENGTH", parseZeroOrPositiveInt, POOL_DEFAULTS.queueLength),
      // 0 turns spare instances off.
      spareInstances: read("SERVICE_ENV_SPARE_INSTANCES", parseZeroOrPositiveInt, POOL_DEFAULTS.spareInstances),
      spareMemoryMib: read("SERVICE_ENV_SPARE_MEMORY_MIB", parsePositiveInt, POOL_DEFAULTS.spareMemoryMib),
      // 0 (the default) keeps every prepared component compiled (SPEC 3 rule 4).
      compiledMemoryMib: read("SERVICE_ENV_COMPILED_MEMORY_MIB", parseZeroOrPositiveInt, POOL_DEFAULTS.compiledMemoryMib),
      sandbox: read("SERVICE_ENV_SANDBOX", parseOnOff, POOL_DEFAULTS.sandbox),
      // 0 turns the workspace quota off.
      workspaceQuotaBytes: read("SERVICE_ENV_WORKSPACE_QUOTA_MIB", parseZeroOrPositiveInt, POOL_DEFAULTS.workspaceQuotaBytes / MiB) * MiB,
      scratchQuotaBytes: read("SERVICE_ENV_SCRATCH_QUOTA_MIB", parsePositiveInt, POOL_DEFAULTS.scratchQuotaBytes / MiB) * MiB,
    },
    sessions: {
      maxPayloadBytes: read("SERVICE_JOURNAL_MAX_PAYLOAD_BYTES", parsePositiveInt, 1 * MiB),
      maxJsonDepth: read("SERVICE_JOURNAL_MAX_JSON_DEPTH", parseJsonDepth, 32),
      progress: {
        maxEvents: read("SERVICE_JOURNAL_MAX_PROGRESS_EVENTS", parseZeroOrPositiveInt, 100),
        maxBytes: read("SERVICE_JOURNAL_MAX_PROGRESS_BYTES", parsePositiveInt, 16 * 1024),
      },
      maxFieldBytes: read("SERVICE_MAX_FIELD_BYTES", parsePositiveInt, 64 * 1024),
      sessionMaxBytes: read("SERVICE_SESSION_MAX_BYTES", parsePositiveInt, 2 * MiB),
      sessionCacheBytes: read("SERVICE_SESSION_CACHE_MIB", parseZeroOrPositiveInt, 64) * MiB,
      runMaxRounds: read("SERVICE_RUN_MAX_ROUNDS", parsePositiveInt, 32),
      runRetentionDays: read("SERVICE_RUN_RETENTION_DAYS", parsePositiveInt, 30),
      runResume: read("SERVICE_RUN_RESUME", parseOnOff, true),
      hostMaxInFlight: read("SERVICE_HOST_MAX_IN_FLIGHT", parsePositiveInt, 64),
      hostMaxQueued: read("SERVICE_HOST_MAX_QUEUED", parsePositiveInt, 256),
    },
    models: {
      anthropicBaseUrl: read("SERVICE_ANTHROPIC_BASE_URL", parseUrl, "https://api.anthropic.com"),
      openaiBaseUrl,
      openaiApi: read("SERVICE_OPENAI_API", parseOpenAIApi, new URL(openaiBaseUrl).hostname === "api.openai.com" ? "responses" : "chat-completions"),
      // 0 turns retries off.
      maxRetries: read("SERVICE_MODEL_MAX_RETRIES", parseZeroOrPositiveInt, 2),
      timeoutSecs: read("SERVICE_MODEL_TIMEOUT_SECS", parsePositiveInt, 300),
    },
    replicas: {
      id: read("SERVICE_REPLICA_ID", parseReplicaId, undefined),
      address: read("SERVICE_REPLICA_ADDRESS", parseUrl, undefined),
      leaseSecs: read("SERVICE_SESSION_LEASE_SECS", parsePositiveInt, 10),
    },
  };
  // A workspace's share of the pool: half of it unless set, so that one workspace never holds it all.
  const pool = settings.env;
  pool.workspaceToolSlots ||= Math.ceil((pool.workers * pool.toolSlotsPerWorker) / 2);
  pool.workspaceAgentLoopSlots ||= Math.ceil((pool.workers * pool.agentLoopSlotsPerWorker) / 2);
  pool.workspaceWorkers ||= Math.ceil(pool.workers / 2);
  settings.workspaceRates.burst ||= 2 * settings.workspaceRates.requestsPerSec;
  checkBodyBudgets(settings, problems);
  checkListBudget(settings, problems);
  checkWorkspaceRoot(settings, problems);
  checkBlobStore(settings, problems);
  if (problems.length > 0) throw new SettingsError(`invalid settings:\n  ${problems.join("\n  ")}`);
  return settings;
}

/**
 * Past 40 levels of JSON, an event carrying the payload (up to 8 messages around it, 2 per level)
 * would come near the 100 nested messages that protobuf decoders read: no client could read it.
 */
const MAX_JSON_DEPTH_SETTING = 40;

/** A replica id goes into database rows and logs: a short name of letters, digits, `.`, `_` and `-`. */
function parseReplicaId(raw: string): string {
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(raw)) throw new Error("expected 1 to 64 letters, digits, '.', '_' or '-'");
  return raw;
}

/** A line must hold a request's fields with their strings cut (server/src/http/request-log.ts). */
function parseLogLineBytes(raw: string): number {
  const bytes = parsePositiveInt(raw);
  if (bytes < 512) throw new Error("expected a positive integer of at least 512");
  return bytes;
}

function parseJsonDepth(raw: string): number {
  const depth = parsePositiveInt(raw);
  if (depth > MAX_JSON_DEPTH_SETTING) throw new Error(`expected a positive integer of at most ${MAX_JSON_DEPTH_SETTING}`);
  return depth;
}

/**
 * Sandboxed workers may write anywhere under the workspace root: it must hold nothing of the data
 * directory but its own `workspaces/` (never its keys, metadata or blobs).
 */
function checkWorkspaceRoot({ dataDir, env }: Settings, problems: string[]): void {
  const within = (parent: string, child: string) => {
    const relative = path.relative(parent, child);
    return relative === "" || (!relative.startsWith("..") && !path.isAbsolute(relative));
  };
  if (within(env.workspaceRoot, dataDir) || (within(dataDir, env.workspaceRoot) && !within(path.join(dataDir, "workspaces"), env.workspaceRoot))) {
    problems.push("SERVICE_ENV_WORKSPACE_ROOT: must not contain the data directory nor lie inside it, except under its workspaces/ directory");
  }
}

/** S3 refuses presigned URLs valid for longer than 7 days. */
const MAX_S3_PRESIGN_SECS = 7 * 24 * 3600;

function checkBlobStore({ blobStore, limits }: Settings, problems: string[]): void {
  if (blobStore && limits.uploadUrlTtlSecs > MAX_S3_PRESIGN_SECS) {
    problems.push(`SERVICE_UPLOAD_URL_TTL_SECS, SERVICE_BLOB_URL: with S3, upload URLs last at most ${MAX_S3_PRESIGN_SECS} seconds (7 days)`);
  }
}

/** Every session fits a page of ListSessions (a page holds at least one item anyway, but then it passes the budget). */
function checkListBudget({ limits, sessions }: Settings, problems: string[]): void {
  if (sessions.sessionMaxBytes > limits.listMaxBytes) problems.push("SERVICE_SESSION_MAX_BYTES, SERVICE_LIST_MAX_BYTES: the first must be at most the second");
}

/** Budgets smaller than the largest request would refuse that request forever. */
function checkBodyBudgets({ limits, http }: Settings, problems: string[]): void {
  if (limits.maxRequestBytes > http.maxConnectionBodyBytesInFlight || http.maxConnectionBodyBytesInFlight > http.maxBodyBytesInFlight) {
    problems.push("SERVICE_MAX_REQUEST_BYTES, SERVICE_MAX_CONNECTION_BODY_BYTES_IN_FLIGHT, SERVICE_MAX_BODY_BYTES_IN_FLIGHT: each must be at most the next");
  }
}
