export interface Summary {
  n: number;
  medianMs: number;
  p99Ms: number;
  meanMs: number;
}

/** Nearest-rank percentile (no interpolation): with 2000 samples p99 is the 1980th value. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1]!;
}

export function summarize(samplesMs: readonly number[]): Summary {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  const mean = sorted.reduce((sum, x) => sum + x, 0) / (sorted.length || Number.NaN);
  return { n: sorted.length, medianMs: percentile(sorted, 50), p99Ms: percentile(sorted, 99), meanMs: mean };
}

export function throughput(calls: number, elapsedMs: number): number {
  return elapsedMs > 0 ? (calls * 1000) / elapsedMs : Number.NaN;
}

export const MiB = 1024 * 1024;
