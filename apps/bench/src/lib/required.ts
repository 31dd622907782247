/**
 * `value`, which the code has every reason to expect (the row an insert returns, a sample
 * it took, a node the profile lists): its absence is an error naming `what`, not an
 * `undefined` read on.
 */
export function required<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`missing: ${what}`);
  return value;
}

/** `map`'s entry for `key`, which it has every reason to hold: its absence is an error naming both. */
export function entry<K, V>(map: ReadonlyMap<K, V>, key: K, what: string): V {
  const value = map.get(key);
  if (value === undefined) throw new Error(`missing: ${what} ${String(key)}`);
  return value;
}
