import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import {
  AdmitAgentLoopRequestSchema,
  AdmitToolRequestSchema,
  ArtifactSchema,
  type ArtifactService,
  type PrepareRequest,
} from "../../../gen/skillenv/env/v1/artifacts_pb.js";
import { requireWorkspace } from "../auth/index.ts";
import { serviceError } from "../errors/index.ts";
import type { Admission } from "./admission.ts";
import type { ArtifactRecord } from "./artifact-records.ts";
import type { ArtifactKind } from "./kinds.ts";
import type { Preparer } from "./preparer.ts";
import { componentSource, programSource } from "./request-bodies.ts";

/** Bounds the work one prepare call can ask for; clients batch larger sets. */
export const MAX_PREPARE_ARTIFACTS = 1000;

export function createArtifactService(admission: Admission, preparer: Preparer): ServiceImpl<typeof ArtifactService> {
  const get = async (kind: ArtifactKind, id: string, context: HandlerContext) => ({
    artifact: artifactMessage(await admission.get(requireWorkspace(context), kind, id)),
  });
  return {
    async admitTool(request, context) {
      const record = await admission.admitComponent(requireWorkspace(context), "tool", componentSource(request, AdmitToolRequestSchema));
      return { id: record.id };
    },
    async admitAgentLoop(request, context) {
      const record = await admission.admitComponent(requireWorkspace(context), "agentloop", componentSource(request, AdmitAgentLoopRequestSchema));
      return { id: record.id };
    },
    async admitProgram(request, context) {
      const record = await admission.admitProgram(requireWorkspace(context), programSource(request));
      return { id: record.id };
    },
    getTool: (request, context) => get("tool", request.id, context),
    getAgentLoop: (request, context) => get("agentloop", request.id, context),
    getProgram: (request, context) => get("program", request.id, context),

    async prepare(request, context) {
      const workspace = requireWorkspace(context);
      // Every id resolves before anything is prepared, so one unknown id prepares nothing.
      const records = await Promise.all(requested(request).map(({ kind, id }) => admission.get(workspace, kind, id)));
      await prepareOrFail(preparer, records);
      return { artifacts: records.map(({ id, kind }) => ({ id, kind, ready: true })) };
    },
  };
}

/** The requested artifacts in response order, each once. */
function requested(request: PrepareRequest): { kind: ArtifactKind; id: string }[] {
  const lists: [ArtifactKind, string[]][] = [
    ["agentloop", request.agentloops],
    ["program", request.programs],
    ["tool", request.tools],
  ];
  const artifacts = lists.flatMap(([kind, ids]) => [...new Set(ids)].map((id) => ({ kind, id })));
  if (artifacts.length > MAX_PREPARE_ARTIFACTS) {
    throw serviceError("invalid_argument", `at most ${MAX_PREPARE_ARTIFACTS} artifacts can be prepared in one call`);
  }
  return artifacts;
}

/** The preparer's stable errors pass through; anything else it throws is a preparation failure. */
async function prepareOrFail(preparer: Preparer, records: readonly ArtifactRecord[]): Promise<void> {
  try {
    await preparer.prepare(records);
  } catch (error) {
    if (error instanceof ConnectError) throw error;
    throw serviceError(
      "preparation_failed",
      `preparing ${records.map((r) => `${r.kind} ${r.id}`).join(", ")} failed: ${String((error as Error)?.message ?? error)}`,
    );
  }
}

function artifactMessage(record: ArtifactRecord) {
  return create(ArtifactSchema, {
    id: record.id,
    kind: record.kind,
    sizeBytes: BigInt(record.sizeBytes),
    admittedAt: timestampFromMs(Date.parse(record.admittedAt)),
    world: record.world ?? "",
    imports: record.imports ?? [],
  });
}
