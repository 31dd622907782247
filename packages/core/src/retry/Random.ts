/**
 * A source of random numbers in [0, 1), like `Math.random`. Injected wherever jitter or
 * fault injection needs randomness, so a test can replay a run from its seed.
 */
export type Random = () => number;

/**
 * A small deterministic PRNG (mulberry32): the same seed gives the same sequence on
 * every platform. Good for jitter and tests; not for anything secret.
 *
 * @param seed Any finite number; its integer part modulo 2^32 is used.
 */
export function seededRandom(seed: number): Random {
  if (!Number.isFinite(seed)) {
    throw new RangeError(`seededRandom(seed): seed must be a finite number; got ${seed}.`);
  }
  let state = Math.trunc(seed) >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
