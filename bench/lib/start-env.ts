// The environment `npm start` gives the service: the variable assignments before `node` in
// package.json's scripts.start (glibc's MALLOC_MMAP_THRESHOLD_, docs/operations.md#process-memory).
// Bench children that stand for a server run with it, so that their memory is the service's as
// started; read from package.json, so that the value lives in one place.
import { readFileSync } from "node:fs";

export function startEnvironment(): Record<string, string> {
  const manifest = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { scripts: { start: string } };
  const assignments = /^((?:\w+=\S+\s+)*)node\s/.exec(manifest.scripts.start)?.[1] ?? "";
  return Object.fromEntries([...assignments.matchAll(/(\w+)=(\S+)/g)].map((match) => [match[1]!, match[2]!]));
}
