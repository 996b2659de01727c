import * as fs from "node:fs/promises";
import * as path from "node:path";
import type { ArtifactKind } from "./kinds.ts";

/** One artifact listed in the preparation file, read from disk. */
export interface StartupArtifact {
  kind: ArtifactKind;
  file: string;
  bytes: Uint8Array;
}

/** Raised for any problem with the preparation file; startup stops with its message. */
export class PreparationFileError extends Error {
  override name = "PreparationFileError";
}

const FIELDS: Readonly<Record<string, ArtifactKind>> = { agentloops: "agentloop", programs: "program", tools: "tool" };

/**
 * Reads SERVICE_ENV_PREPARATION (spec §2.5): `{"agentloops": [...], "programs": [...], "tools": [...]}`,
 * paths relative to the file. Unknown fields, non-string paths and unreadable files are refused,
 * each message naming the file and the offending field or path.
 */
export async function readPreparationFile(file: string): Promise<StartupArtifact[]> {
  const document = await parseDocument(file);
  const artifacts: StartupArtifact[] = [];
  for (const [field, value] of Object.entries(document)) {
    const kind = FIELDS[field];
    if (kind === undefined) throw new PreparationFileError(`${file}: unknown field ${JSON.stringify(field)}; allowed: agentloops, programs, tools`);
    if (!Array.isArray(value) || value.some((item) => typeof item !== "string")) {
      throw new PreparationFileError(`${file}: ${field} must be an array of paths`);
    }
    for (const relative of value as string[]) artifacts.push({ kind, file: relative, bytes: await readListed(file, relative) });
  }
  return artifacts;
}

async function parseDocument(file: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await fs.readFile(file, "utf8");
  } catch (error) {
    throw new PreparationFileError(`${file}: cannot read the preparation file (${(error as NodeJS.ErrnoException).code})`);
  }
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    throw new PreparationFileError(`${file}: not valid JSON (${(error as Error).message})`);
  }
  if (typeof document !== "object" || document === null || Array.isArray(document)) {
    throw new PreparationFileError(`${file}: expected a JSON object with agentloops, programs and tools`);
  }
  return document as Record<string, unknown>;
}

async function readListed(file: string, relative: string): Promise<Uint8Array> {
  const resolved = path.resolve(path.dirname(file), relative);
  try {
    return await fs.readFile(resolved);
  } catch (error) {
    throw new PreparationFileError(`${file}: cannot read ${relative} (${(error as NodeJS.ErrnoException).code})`);
  }
}
