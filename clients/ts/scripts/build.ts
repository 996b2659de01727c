// Builds the package that users install into dist/. In this repository Node 24 runs the client's
// TypeScript sources directly, and the workspace's manifest points at them; Node 20 cannot run
// .ts files, nor can any Node run them from node_modules. So the published package is the same
// layout compiled: src/ and bin/ as .js with .d.ts beside them, gen/ copied as generated (it is
// already .js and .d.ts), and a manifest whose exports and bin name the .js files.
import { execFileSync } from "node:child_process";
import { cpSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "..");
const dist = path.join(root, "dist");

rmSync(dist, { recursive: true, force: true });
// The workspace's own tsc, which npm scripts put on PATH.
execFileSync("tsc", ["-p", path.join(root, "tsconfig.build.json")], { stdio: "inherit" });
cpSync(path.join(root, "gen"), path.join(dist, "gen"), { recursive: true });

const { scripts: _workspaceOnly, ...manifest } = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));
const published = { ...manifest, exports: compiled(manifest.exports), bin: compiled(manifest.bin) };
writeFileSync(path.join(dist, "package.json"), `${JSON.stringify(published, null, 2)}\n`);

/** The same entries, naming the compiled .js files instead of the .ts sources. */
function compiled(entries: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(entries).map(([name, target]) => [name, target.replace(/\.ts$/, ".js")]));
}
