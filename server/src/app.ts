import { createConnectRouter } from "@connectrpc/connect";
import { AssetService } from "../../gen/skillenv/assets/v1/assets_pb.js";
import { ArtifactService, createArtifacts } from "./artifacts/index.ts";
import { CHECKSUM_HEADER, createAssets } from "./assets/index.ts";
import { ApiKeys, DEV_WORKSPACE, WorkspaceRateLimiter, authenticationGate, bearerAuthenticator, loadOrCreateDevKey } from "./auth/index.ts";
import type { Settings } from "./config/index.ts";
import { loadConsole } from "./console/index.ts";
import { ERROR_DETAILS } from "./errors/index.ts";
import { Health, HealthState } from "./health/index.ts";
import {
  BodyBudget,
  createRequestListener,
  listen,
  logWriter,
  recordingGate,
  startingListener,
  type Listener,
  type LogSink,
  type LogWriter,
  type RequestListener,
} from "./http/index.ts";
import {
  createHostService,
  ExtensionEnvironmentKind,
  McpEnvironmentKind,
  HostEnvironmentKind,
  HostHub,
  HostService,
  Sealer,
  ServiceEnvironmentKind,
  startServiceEnvironment,
  type ServiceEnvironment,
} from "./environments/index.ts";
import { createModelProviders, observeModelCalls } from "./models/index.ts";
import { createMcpEndpoint } from "./mcp-server/index.ts";
import { Metrics, serveMetrics } from "./metrics/index.ts";
import { OPENAPI_PATH, readOpenApiFile } from "./openapi/index.ts";
import { reflectionServices, serveReflection } from "./reflection/index.ts";
import { createRuns, RunService, S3RunAssets, type Runs } from "./runs/index.ts";
import { createSessions, createSessionService, SessionService } from "./sessions/index.ts";
import { createSkills, SkillService } from "./skills/index.ts";
import { createStatusService, StatusService } from "./status/index.ts";
import { dataDirSecrets, FileBlobStore, openStore, S3BlobStore, storageErrorInterceptor, storeSecrets, type SecretSource } from "./storage/index.ts";
import { forwardingService, LeasedOwnership, replicaId, SoloOwnership } from "./replicas/index.ts";
import { startTracing, type Tracing } from "./tracing/index.ts";
import { createTranscoder } from "./transcoder/index.ts";

export interface RunningService {
  /** Base URL of the listening port, e.g. http://127.0.0.1:8080. */
  readonly url: string;
  /** Where `GET /metrics` is served (SERVICE_METRICS_LISTEN); undefined when metrics are off. */
  readonly metricsUrl: string | undefined;
  /** Set when no keys were configured: where the development key was written. */
  readonly devKeyFile: string | undefined;
  /** The service environment (worker pool); sessions and runs execute through it. */
  readonly serviceEnv: ServiceEnvironment;
  /** The run engine (server-internal: retention sweeps, tests). */
  readonly runs: Runs;
  /** Graceful: stop accepting, finish in-flight calls (up to the grace period), reap workers, close storage. */
  close(): Promise<void>;
}

/** The API's services: served on every protocol, and over JSON HTTP by the transcoder from their google.api.http rules, which gen/openapi.json describes. */
export const API_SERVICES = [AssetService, SkillService, ArtifactService, SessionService, RunService, HostService, StatusService] as const;

export interface StartOptions {
  /** Where request log lines go; default stdout when settings.logRequests is on. */
  log?: LogSink;
  /** The built web console to serve at /console/; default build/console (clients/console/build.ts). */
  consoleDir?: string;
  /** Told the base URL once the port is open, while the server is still starting (the probes answer from then on). */
  onPortOpen?: (url: string) => void;
}

/**
 * Composition root: opens the one-port listener first (it answers the probes and refuses the rest
 * `unavailable` while the server starts), then opens storage, starts the worker pool, wires the
 * services and hands the listener to them.
 */
export async function startService(settings: Settings, options: StartOptions = {}): Promise<RunningService> {
  // Installed first, so that every span of the service goes to the exporter; none when unconfigured.
  const log = serviceLog(settings, options);
  const tracing = settings.tracing && startTracing(settings.tracing, (failure) => log?.({ ...failure }));
  const health = new HealthState(API_SERVICES.map((service) => service.typeName));
  const readiness = () => health.readiness();
  let serve: RequestListener = startingListener(readiness);
  try {
    const listener = await listen({ ...settings.listen, tls: settings.tls, limits: settings.http }, (req, res) => serve(req, res));
    options.onPortOpen?.(listener.url);
    try {
      return await wire(settings, options, { health, readiness, listener, tracing, log, serveWith: (ready) => (serve = ready) });
    } catch (error) {
      await listener.close(0);
      throw error;
    }
  } catch (error) {
    await tracing?.shutdown();
    throw error;
  }
}

/** The service's log: one JSON line per entry, on stdout unless the caller takes them; none when SERVICE_LOG_REQUESTS is off. */
function serviceLog(settings: Settings, options: StartOptions): LogWriter | undefined {
  const sink = options.log ?? (settings.logRequests ? (line: string) => process.stdout.write(`${line}\n`) : undefined);
  return sink && logWriter(sink, settings.logMaxLineBytes);
}

/** What startService opened before the rest: the health state and the listener, and how to hand it the API. */
interface Started {
  health: HealthState;
  /** What the probes report, from `health`. */
  readiness: () => string;
  listener: Listener;
  /** Undefined when no exporter is configured. */
  tracing: Tracing | undefined;
  /** The service log (serviceLog), made once for tracing and the services. */
  log: LogWriter | undefined;
  serveWith(ready: RequestListener): void;
}

async function wire(settings: Settings, options: StartOptions, { health, readiness, listener, tracing, log, serveWith }: Started): Promise<RunningService> {
  const store = await openStore(settings);
  const metrics = settings.metricsListen ? new Metrics() : undefined;
  if (metrics) store.observeCommits((group) => metrics.storeCommit(group));
  let serviceEnv: ServiceEnvironment | undefined;
  try {
    const s3 = settings.blobStore && (await S3BlobStore.open(settings.blobStore));
    const blobs = s3 ?? (await FileBlobStore.open(settings.dataDir));
    // Keys every replica must share live in the shared database; the embedded default keeps them in the data directory.
    const secrets = settings.databaseUrl ? storeSecrets(store) : dataDirSecrets(settings.dataDir);
    const { keys, devKeyFile } = await resolveKeys(settings, secrets);
    const assets = await createAssets({ store, blobs, staged: s3, secrets, ...settings.limits, publicUrl: settings.publicUrl });
    assets.startCollection();

    const skills = createSkills(store, assets, blobs, settings.limits);
    await skills.migrate();

    const { maxComponentBytes, maxInlineComponentBytes, maxSourceBytes } = settings.env;
    const artifacts = createArtifacts({ store, blobs, assets, limits: { maxComponentBytes, maxInlineComponentBytes, maxSourceBytes } });
    serviceEnv = await startServiceEnvironment(settings, artifacts, keys.workspaces());
    const environment = serviceEnv;
    const { filesystemAllow, networkAllow, mcpAllow, secretAllow, workspaceRoot } = settings.env;
    // Extension and MCP credentials and the provider keys of runs that may resume are sealed with one key.
    const sealer = await Sealer.open(secrets);
    const hosts = new HostHub({ maxInFlight: settings.sessions.hostMaxInFlight, maxQueued: settings.sessions.hostMaxQueued });
    const kinds = {
      service: new ServiceEnvironmentKind({ pool: serviceEnv.pool, artifacts, allow: { filesystemAllow, networkAllow, secretAllow }, workspaceRoot }),
      host: new HostEnvironmentKind(hosts),
      extension: new ExtensionEnvironmentKind({ sealer, networkAllow }),
      mcp: new McpEnvironmentKind({ sealer, mcpAllow }),
    };
    const { listMaxBytes } = settings.limits;
    // One process owns every session of the embedded store; replicas on a shared database own them under leases.
    const ownership = settings.databaseUrl
      ? new LeasedOwnership({
          store,
          replica: await replicaId(settings.replicas.id, settings.dataDir),
          address: settings.replicas.address ?? listener.url,
          leaseSecs: settings.replicas.leaseSecs,
        })
      : new SoloOwnership("embedded");
    const sessions = await createSessions({
      ownership,
      store,
      kinds,
      settings: settings.sessions,
      maxTurnSecs: settings.env.maxTurnSecs,
      listMaxBytes,
      onOperation: metrics && ((operation) => metrics.operation(operation)),
    });
    const providers = createModelProviders(settings.models, settings.sessions.maxJsonDepth);
    const runs = await createRuns({
      onRunEnded: metrics && ((run) => metrics.runEnded({ ...run, provider: run.model.provider })),
      sealer: settings.sessions.runResume ? sealer : undefined,
      shared: ownership.shared,
      // In the shared bucket, so that a replica taking a session over resumes its run from them.
      snapshots: s3 && new S3RunAssets(s3),
      store,
      dataDir: settings.dataDir,
      sessions,
      skills: skills.registry,
      assets,
      providers: metrics ? observeModelCalls(providers, (call) => metrics.modelCall(call)) : providers,
      settings: {
        maxRounds: settings.sessions.runMaxRounds,
        maxTurnSecs: settings.env.maxTurnSecs,
        maxMessageBytes: settings.sessions.maxPayloadBytes,
        maxFieldBytes: settings.sessions.maxFieldBytes,
        retentionDays: settings.sessions.runRetentionDays,
        progress: settings.sessions.progress,
        listMaxBytes,
      },
    });

    if (ownership instanceof LeasedOwnership) {
      await ownership.start({
        exists: (sessionId) => sessions.exists(sessionId),
        async takenOver(sessionId, previous) {
          await sessions.takeOver(sessionId, previous?.replica);
          await runs.runs.takeOver(sessionId);
        },
        lost(sessionId) {
          sessions.lose(sessionId);
          runs.runs.lose(sessionId);
        },
      });
      ownership.startSweeping(async () => new Set([...(await sessions.unfinished()), ...(await runs.runs.unfinishedSessions())]));
    }

    // Without a pool (the service environment unavailable: docs/operations.md) there is nothing to observe.
    const { pool } = environment;
    if (pool && metrics) {
      metrics.observePool(() => pool.stats());
      pool.observeInvocations((invocation) => metrics.invocation(invocation));
    }
    metrics?.observeSessions(
      () => sessions.census(),
      () => hosts.attached,
    );
    // A call that failed on storage makes the server not ready until the store answers a probe again.
    const storageFailed = () => {
      health.storageFailed();
      metrics?.storageError();
    };
    // Every workspace's requests share this process's event loop: each gets its share (docs/operations.md).
    const workspaceRates = new WorkspaceRateLimiter(settings.workspaceRates);
    metrics?.observeHeldRefusals(() => workspaceRates.heldInAll());
    const router = createConnectRouter({
      requestGate: recordingGate(authenticationGate(keys, new Set([Health, ...reflectionServices].map((service) => service.typeName)), workspaceRates)),
      interceptors: [storageErrorInterceptor(storageFailed)],
      readMaxBytes: settings.limits.maxRequestBytes,
    });
    router.service(AssetService, assets.service);
    router.service(SkillService, skills.service);
    router.service(ArtifactService, artifacts.service(serviceEnv.preparer));
    // A call for a session another replica owns is forwarded to it (server/src/replicas).
    router.service(SessionService, forwardingService(SessionService, createSessionService(sessions, kinds, runs.firstRun), ownership));
    router.service(RunService, forwardingService(RunService, runs.service, ownership));
    const checkHost = (key: { workspace: string; sessionId: string; environment: string }) =>
      sessions.requireBinding(key.workspace, key.sessionId, key.environment, "host");
    router.service(
      HostService,
      forwardingService(
        HostService,
        createHostService(hosts, checkHost, (entry) => log?.(entry), { refusalsLoggedPerMinute: settings.logHostRefusalsPerMin }),
        ownership,
      ),
    );
    // The workspace's own part of the numbers the metrics export for the process.
    router.service(
      StatusService,
      createStatusService({
        sessions: (workspace) => sessions.census(workspace),
        runs: (workspace, since, limit) => runs.runs.startedSince(workspace, since, limit),
        pool,
      }),
    );
    // Anyone may call the health and reflection services, so their requests stay tiny.
    router.service(Health, health.service(), { readMaxBytes: settings.limits.maxPublicRequestBytes });
    serveReflection(router, ERROR_DETAILS, { readMaxBytes: settings.limits.maxPublicRequestBytes });

    const bodyBudget = new BodyBudget({ total: settings.http.maxBodyBytesInFlight, perConnection: settings.http.maxConnectionBodyBytesInFlight });
    metrics?.observeHttp(
      () => listener.stats(),
      () => bodyBudget.stats(),
    );
    const onRequest = createRequestListener({
      bodyBudget,
      handlers: router.handlers,
      transcoder: createTranscoder({ services: API_SERVICES, handlers: router.handlers, maxBodyBytes: settings.limits.maxRequestBytes }),
      rawEndpoints: assets.uploads ? [assets.uploads] : [],
      protocolEndpoints: [
        createMcpEndpoint({
          authenticate: bearerAuthenticator(keys),
          workspaceRates,
          registry: skills.registry,
          sessions,
          ownership,
          maxBodyBytes: settings.limits.maxRequestBytes,
        }),
      ],
      publicJson: new Map([[OPENAPI_PATH, await readOpenApiFile()]]),
      staticSites: [await loadConsole(options.consoleDir)],
      corsOrigins: settings.corsOrigins,
      corsHeaders: [CHECKSUM_HEADER],
      limits: settings.http,
      log,
      onRequestDone: metrics && ((record, seconds) => metrics.request(record, seconds)),
      readiness,
      workspaceRates,
    });
    const scrapes = metrics && settings.metricsListen ? await serveMetrics(metrics, settings.metricsListen) : undefined;
    const probe = store.table<true>("readiness-probe");
    health.watchStorage(async () => void (await probe.get("probe")));
    serveWith(onRequest);
    health.started();
    return {
      url: listener.url,
      metricsUrl: scrapes?.url,
      devKeyFile,
      serviceEnv: environment,
      runs: runs.runs,
      async close() {
        health.setNotServing();
        await runs.runs.close();
        hosts.closeAll("shutting_down");
        await listener.close(settings.shutdownGraceSecs * 1000);
        await ownership.close();
        await scrapes?.close();
        await environment.close();
        await skills.close();
        assets.stopCollection();
        await store.close();
        // Last, so that the spans of the drained calls are exported too.
        await tracing?.shutdown();
      },
    };
  } catch (error) {
    await serviceEnv?.close();
    await store.close();
    throw error;
  }
}

async function resolveKeys(settings: Settings, secrets: SecretSource): Promise<{ keys: ApiKeys; devKeyFile: string | undefined }> {
  if (settings.apiKeys) return { keys: new ApiKeys(settings.apiKeys), devKeyFile: undefined };
  const dev = await loadOrCreateDevKey(secrets, settings.dataDir);
  return { keys: new ApiKeys(new Map([[dev.key, DEV_WORKSPACE]])), devKeyFile: dev.file };
}
