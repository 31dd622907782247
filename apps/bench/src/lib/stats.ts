/** Latency and rate summaries. Percentiles are nearest-rank on the sorted sample. */

export interface Summary {
  count: number;
  mean: number;
  p50: number;
  p99: number;
  max: number;
}

/** The nearest-rank percentile `p` (0–100) of an ascending array; NaN when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  const rank = p <= 0 ? 1 : Math.min(sorted.length, Math.ceil((p / 100) * sorted.length));
  // Out of range only when there is no data.
  return sorted[rank - 1] ?? Number.NaN;
}

export function summarize(values: readonly number[]): Summary {
  const sorted = Float64Array.from(values).sort();
  const list = Array.from(sorted);
  let sum = 0;
  for (const value of list) sum += value;
  return {
    count: list.length,
    mean: list.length === 0 ? Number.NaN : sum / list.length,
    p50: percentile(list, 50),
    p99: percentile(list, 99),
    max: list.at(-1) ?? Number.NaN,
  };
}

/** The median of a few numbers (rounds of one measurement); NaN when empty. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  // Out of range only when there is no data.
  const upper = sorted[middle] ?? Number.NaN;
  return sorted.length % 2 === 1 ? upper : ((sorted[middle - 1] ?? Number.NaN) + upper) / 2;
}

/**
 * Round by round, `combine` of a measurement and the baseline measured in the same round
 * (the ratios and differences a side-by-side run reports); a round with no baseline is an
 * error, not a NaN.
 */
export function perRound<T, B>(
  measured: readonly T[],
  baseline: readonly B[],
  combine: (value: T, base: B) => number,
): number[] {
  return measured.map((value, round) => {
    const base = baseline[round];
    if (base === undefined) throw new Error(`round ${round + 1} has no baseline`);
    return combine(value, base);
  });
}

/** Milliseconds since an arbitrary origin, sub-millisecond. */
export const nowMs = (): number => performance.now();

/** Runs `fn` and returns how long it took in ms, with its result. */
export async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const started = nowMs();
  const value = await fn();
  return { ms: nowMs() - started, value };
}

/** Least-squares slope of `values` against their index. */
export function slope(values: readonly number[]): number {
  const count = values.length;
  if (count < 2) return 0;
  const meanX = (count - 1) / 2;
  const meanY = values.reduce((sum, value) => sum + value, 0) / count;
  let covariance = 0;
  let variance = 0;
  values.forEach((value, index) => {
    covariance += (index - meanX) * (value - meanY);
    variance += (index - meanX) ** 2;
  });
  return covariance / variance;
}
