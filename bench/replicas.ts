// Replicas (issue #20): what several replicas on PostgreSQL + S3 cost beside the embedded
// LevelDB + files, on one machine (the replicas share its cores, so these are costs, not a
// speed-up). Three CallTool variants of echo-wat in interleaved rounds, all measured in this run:
//   - LevelDB + files: one service on the embedded default (the baseline);
//   - PostgreSQL + S3, at the owner: a replica called for a session it owns;
//   - PostgreSQL + S3, forwarded: the same session called through a second replica, which makes
//     the call again to the owner over gRPC (the forwarding hop).
// Then the takeover: kill -9 of a session's owner, and the time until a call through another
// replica succeeds (its lease must expire first: SERVICE_SESSION_LEASE_SECS, set short for it).
import * as fs from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";
import { startPostgres } from "../server/test/helpers/postgres.ts";
import { startS3 } from "../server/test/helpers/s3.ts";
import { formatFigures } from "./lib/figures.ts";
import { admitTool, connectH2, createEchoSession, echoCaller, runClient, sessionClient, spawnProvider, spawnService, withChildren } from "./lib/services.ts";
import { loadScripts, MODELS, serviceEnv, SessionPool } from "./runs.ts";
import type { ResultRow, Suite, SuiteReport } from "./lib/suite.ts";
import { fixed } from "./lib/table.ts";
import { childSide, measureVariants, type Plan, type Variant } from "./lib/variants.ts";

const ROOT = path.resolve(import.meta.dirname, "..");
const PLAN: Plan = { rounds: 6, inFlight: 16, budgetMs: 15_000 };
const SEQUENTIAL = { warmup: 100, perRound: 100 };
const CONCURRENT = 1000;
/** The bench's one workspace gets the whole pool (its default share is half of it). */
const SERVICE_ENV = {
  SERVICE_ENV_TOOL_SLOTS: String(PLAN.inFlight),
  SERVICE_ENV_WORKSPACE_TOOL_SLOTS: String(2 * PLAN.inFlight),
  SERVICE_ENV_WORKSPACE_WORKERS: "2",
};
const TEXT_TURNS = { warmup: 64, perRound: 40, concurrent: 600 };
const LEASE_SECS = 2;
const TAKEOVERS = 3;

async function run(): Promise<SuiteReport> {
  const { buildComponents } = await import("../scripts/build-components.ts");
  await buildComponents({ dirs: [path.join(ROOT, "components", "echo-wat")], log: (line) => process.stderr.write(`  ${line}\n`) });
  const tmp = await fs.mkdtemp(path.join(os.tmpdir(), "skillenv-bench-replicas-"));
  const [postgres, s3] = await Promise.all([startPostgres(), startS3()]);
  try {
    const shared = {
      ...s3.env,
      SERVICE_DATABASE_URL: await postgres.createDatabase(),
      SERVICE_BLOB_URL: s3.blobUrl(),
      ...SERVICE_ENV,
    };
    return await withChildren(async (started) => {
      const spawned = async (name: string, env: Record<string, string>) => {
        const service = await spawnService(path.join(tmp, name), env);
        started(service.child);
        return service;
      };
      const provider = started(await spawnProvider());
      await loadScripts(provider.url);
      const model = childSide("provider", provider);
      const embeddedService = await spawned("embedded", { ...serviceEnv(provider), ...SERVICE_ENV });
      const embedded = embeddedService.url;
      const owner = await spawned("owner", { ...serviceEnv(provider), ...shared, SERVICE_REPLICA_ID: "owner" });
      const other = await spawned("other", { ...shared, SERVICE_REPLICA_ID: "other" });

      const embeddedClient = sessionClient(connectH2(embedded));
      const embeddedSession = await createEchoSession(embeddedClient, await admitTool(embedded, "echo-wat"));
      const ownerClient = sessionClient(connectH2(owner.url));
      const sharedSession = await createEchoSession(ownerClient, await admitTool(owner.url, "echo-wat"));
      const variants: Variant[] = [
        {
          name: "CallTool, LevelDB + files (baseline)",
          call: echoCaller(embeddedClient, embeddedSession),
          sides: [childSide("embedded", embeddedService.child)],
          ...SEQUENTIAL,
          concurrent: CONCURRENT,
        },
        {
          name: "CallTool, PostgreSQL + S3, at the owner",
          call: echoCaller(ownerClient, sharedSession),
          sides: [childSide("owner", owner.child)],
          ...SEQUENTIAL,
          concurrent: CONCURRENT,
        },
        {
          name: "CallTool, PostgreSQL + S3, forwarded by another replica",
          call: echoCaller(sessionClient(connectH2(other.url)), sharedSession),
          sides: [childSide("forwarder", other.child), childSide("owner", owner.child)],
          ...SEQUENTIAL,
          concurrent: CONCURRENT,
        },
      ];
      // A complete text turn (CreateRun until turn.completed, the instant scripted model) on each backend, as the runs suite measures it.
      const textTurns = async (url: string) => {
        const pool = await SessionPool.open(sessionClient(connectH2(url)), sessionClient(connectH2(url)), await admitTool(url, "echo-wat"), () => MODELS.text);
        return { pool, call: pool.turnCaller(runClient(connectH2(url)), 0) };
      };
      const [embeddedTurns, ownerTurns] = [await textTurns(embedded), await textTurns(owner.url)];
      variants.push(
        {
          name: "text turn, LevelDB + files (baseline)",
          call: embeddedTurns.call,
          sides: [childSide("embedded", embeddedService.child), model],
          ...TEXT_TURNS,
        },
        { name: "text turn, PostgreSQL + S3, at the owner", call: ownerTurns.call, sides: [childSide("owner", owner.child), model], ...TEXT_TURNS },
      );
      const results = await measureVariants(variants, PLAN);
      embeddedTurns.pool.close();
      ownerTurns.pool.close();
      const [base, atOwner, forwarded, baseTurn, ownerTurn] = results.map((result) => result.row) as [ResultRow, ResultRow, ResultRow, ResultRow, ResultRow];

      const takeovers: number[] = [];
      for (let i = 0; i < TAKEOVERS; i++) takeovers.push(await takeover(tmp, shared, other.url, i));
      takeovers.sort((a, b) => a - b);

      return {
        rows: results.map((result) => result.row),
        notes: [
          "",
          formatFigures([
            {
              figure: "CallTool p50, PostgreSQL + S3 at the owner",
              ours: `${fixed(atOwner.medianMs, 3)} ms`,
              baseline: `LevelDB ${fixed(base.medianMs, 3)} ms`,
              target: "-",
            },
            {
              figure: "text turn p50, PostgreSQL + S3 at the owner",
              ours: `${fixed(ownerTurn.medianMs, 3)} ms`,
              baseline: `LevelDB ${fixed(baseTurn.medianMs, 3)} ms`,
              target: "-",
            },
            {
              figure: "forwarding hop, p50",
              ours: `+${fixed(forwarded.medianMs - atOwner.medianMs, 3)} ms`,
              baseline: `at the owner ${fixed(atOwner.medianMs, 3)} ms`,
              target: "-",
            },
            {
              figure: `CallTool calls/s, ${PLAN.inFlight} in flight (column "calls/s @64")`,
              ours: `owner ${fixed(atOwner.callsPerSec, 0)}, forwarded ${fixed(forwarded.callsPerSec, 0)}`,
              baseline: `LevelDB ${fixed(base.callsPerSec, 0)}`,
              target: "-",
            },
            {
              figure: `takeover after kill -9 (lease ${LEASE_SECS} s), median of ${TAKEOVERS}`,
              ours: `${fixed(takeovers[Math.floor(TAKEOVERS / 2)]!, 0)} ms`,
              baseline: `min ${fixed(takeovers[0]!, 0)}, max ${fixed(takeovers.at(-1)!, 0)} ms`,
              target: "-",
            },
          ]),
          "",
          `Rows: ${PLAN.rounds} interleaved rounds of ${SEQUENTIAL.perRound} sequential calls per variant (${SEQUENTIAL.warmup} warm-up calls first), then ${CONCURRENT} calls with ${PLAN.inFlight} in flight. ` +
            `All three services and PostgreSQL and s3rver share this machine. Takeover: from kill -9 of a session's owner (which had just served a call) to the first CallTool through another replica that returns; ` +
            `calls made meanwhile are refused unavailable (the owner's lease is current, or it cannot be reached) and made again every 50 ms. ` +
            `It is at most one lease (${LEASE_SECS} s here, 10 s by default) after the owner's last renewal, which came up to a third of a lease before the kill, plus the takeover's own recovery.`,
        ],
      };
    });
  } finally {
    await Promise.allSettled([postgres.stop(), s3.stop()]);
    await fs.rm(tmp, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
  }
}

/** One owner started, a session of it called, the owner killed: ms until a call through `through` returns. */
async function takeover(tmp: string, shared: Record<string, string>, through: string, i: number): Promise<number> {
  // Only the doomed owner's lease is short: it is the one that must expire. The measured replicas keep
  // the default, so that a renewal held up by the load the bench makes does not move their sessions.
  const owner = await spawnService(path.join(tmp, `doomed-${i}`), {
    ...shared,
    SERVICE_REPLICA_ID: `doomed-${i}`,
    SERVICE_SESSION_LEASE_SECS: String(LEASE_SECS),
  });
  const sessionId = await createEchoSession(sessionClient(connectH2(owner.url)), await admitTool(owner.url, "echo-wat"));
  await echoCaller(sessionClient(connectH2(owner.url)), sessionId)();
  const call = echoCaller(sessionClient(connectH2(through)), sessionId);
  process.kill(owner.child.pid, "SIGKILL");
  const killedAt = performance.now();
  for (;;) {
    try {
      await call();
      return performance.now() - killedAt;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

export const replicasSuite: Suite = { name: "replicas", title: "CallTool on PostgreSQL + S3 beside LevelDB, the forwarding hop, takeover after kill -9", run };
