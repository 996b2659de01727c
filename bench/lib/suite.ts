/** One line of a suite's result table. */
export interface ResultRow {
  name: string;
  /** Sequential round trips measured (latency sample size). */
  n: number;
  medianMs: number;
  p99Ms: number;
  /** Throughput with the suite's in-flight count outstanding. */
  callsPerSec: number;
  /** RSS of the server child right after this row was measured. */
  serverRssMiB: number;
  /** CPU (user + system, all threads) per call over the row, server and client side: shows which side saturates. */
  serverCpuUs: number;
  clientCpuUs: number;
}

export interface SuiteReport {
  rows: ResultRow[];
  /** Free-form lines printed under the table (memory, ratios, verdicts). */
  notes: string[];
}

/** A benchmark suite; run.ts lists them, and `npm run bench -- <name>` picks one. */
export interface Suite {
  name: string;
  title: string;
  run(): Promise<SuiteReport>;
}
