// Entry point of `npm run bench [-- <suite>]`: runs every suite (or the one named) and prints a table each.
import { machineLoad } from "./lib/machine.ts";
import { fixed, formatTable, type Column } from "./lib/table.ts";
import type { ResultRow, Suite } from "./lib/suite.ts";
import { envSuite } from "./env.ts";
import { hostileSuite } from "./hostile.ts";
import { hostsSuite } from "./hosts.ts";
import { mcpSuite } from "./mcp.ts";
import { modelsSuite } from "./models.ts";
import { protocolsSuite } from "./protocols.ts";
import { replicasSuite } from "./replicas.ts";
import { runsSuite } from "./runs.ts";
import { sessionsSuite } from "./sessions.ts";
import { skillsSuite } from "./skills.ts";

/** Add new suites here. */
const SUITES: Suite[] = [protocolsSuite, skillsSuite, envSuite, sessionsSuite, runsSuite, modelsSuite, hostsSuite, hostileSuite, replicasSuite, mcpSuite];

const COLUMNS: Column<ResultRow>[] = [
  { header: "name", value: (r) => r.name, align: "left" },
  { header: "n", value: (r) => String(r.n) },
  { header: "median ms", value: (r) => fixed(r.medianMs, 3) },
  { header: "p99 ms", value: (r) => fixed(r.p99Ms, 3) },
  { header: "calls/s @64", value: (r) => fixed(r.callsPerSec, 0) },
  { header: "server RSS MiB", value: (r) => fixed(r.serverRssMiB, 1) },
  { header: "server CPU µs/call", value: (r) => fixed(r.serverCpuUs, 0) },
  { header: "client CPU µs/call", value: (r) => fixed(r.clientCpuUs, 0) },
];

const wanted = process.argv[2];
const selected = wanted ? SUITES.filter((suite) => suite.name === wanted) : SUITES;
if (selected.length === 0) {
  process.stderr.write(`unknown suite "${wanted}"; known: ${SUITES.map((s) => s.name).join(", ")}\n`);
  process.exit(2);
}

for (const suite of selected) {
  process.stderr.write(`running ${suite.name}...\n`);
  const started = performance.now();
  const loadBefore = machineLoad();
  const report = await suite.run();
  console.log(`\n## ${suite.name}: ${suite.title}\n`);
  console.log(formatTable(COLUMNS, report.rows));
  for (const note of report.notes) console.log(note);
  console.log(`machine before: ${loadBefore}; after: ${machineLoad()}`);
  console.log(`(${((performance.now() - started) / 1000).toFixed(1)} s)`);
}
// Explicit exit: client HTTP/2 sessions and keep-alive sockets may still hold the event loop.
process.exit(0);
