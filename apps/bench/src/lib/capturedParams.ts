/**
 * Where a value sits among the parameters of a statement captured from the store (through
 * Drizzle's logger), so a floor can send the same statement raw with its own values there.
 */

function indicesOf(params: readonly unknown[], value: unknown): number[] {
  return params.flatMap((param, index) => (param === value ? [index] : []));
}

/** Every position of `value` in `params`; none is an error naming `what`. */
export function allIndices(params: readonly unknown[], value: unknown, what: string): number[] {
  const indices = indicesOf(params, value);
  if (indices.length === 0) {
    throw new Error(`cannot find the ${what} among the captured parameters`);
  }
  return indices;
}

/** The one position of `value` in `params`; none, or more than one, is an error naming `what`. */
export function onlyIndex(params: readonly unknown[], value: unknown, what: string): number {
  const indices = indicesOf(params, value);
  const [index] = indices;
  if (index === undefined || indices.length !== 1) {
    throw new Error(
      `cannot find the ${what} among the captured parameters (${indices.length} matches)`,
    );
  }
  return index;
}
