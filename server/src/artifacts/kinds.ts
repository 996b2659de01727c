/** The kinds of artifact, named as in the paths (/v1/tools, /v1/agentloops, /v1/programs). */
export type ArtifactKind = "tool" | "agentloop" | "program";

/** The kinds that are WebAssembly components. */
export type ComponentKind = Exclude<ArtifactKind, "program">;

/** How people read a kind in messages. */
export const KIND_LABELS: Readonly<Record<ArtifactKind, string>> = {
  tool: "tool",
  agentloop: "agent-loop runtime",
  program: "program",
};
