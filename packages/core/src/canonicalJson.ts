/**
 * Canonical JSON: one text for one value, whatever order its keys were written in, so
 * that two requests that mean the same thing get the same fingerprint.
 *
 * The output is JSON, written with these rules:
 *
 * - **Object keys** are sorted by UTF-16 code unit order (what `Array.prototype.sort`
 *   does with strings), with no whitespace. Only own enumerable string keys count, as in
 *   `JSON.stringify`; symbol keys are ignored.
 * - **Strings** (values and keys) are escaped by `JSON.stringify`, so a lone surrogate
 *   becomes `\udxxx` instead of being lost when the text is encoded as UTF-8.
 * - **Values JSON cannot hold** (`undefined`, functions, symbols): omitted as object
 *   properties and `null` as array elements, exactly as `JSON.stringify` does; anywhere
 *   else (the top level, `Map` keys and values, `Set` elements) they become
 *   `{"$undefined":true}`.
 * - **Numbers**: finite numbers as `JSON.stringify` writes them; `-0` is written `0`
 *   (it equals `0`, and an input should not change meaning because of a sign bit);
 *   `NaN`, `Infinity` and `-Infinity` become `{"$number":"NaN"}`,
 *   `{"$number":"Infinity"}` and `{"$number":"-Infinity"}`.
 * - **`Date`** becomes `{"$date":"<toISOString()>"}`; an invalid date `{"$date":null}`.
 * - **`BigInt`** becomes `{"$bigint":"123"}` (decimal digits).
 * - **`Map`** becomes `{"$map":[[key,value],…]}`, entries sorted by the canonical text of
 *   the key (then of the value), so insertion order does not matter.
 * - **`Set`** becomes `{"$set":[…]}`, elements sorted by their canonical text.
 * - **Boxed primitives** (`new String('a')`) are unboxed, as `JSON.stringify` does.
 * - **Other objects with `toJSON`** are replaced by `toJSON(key)` once, as
 *   `JSON.stringify` does; other objects (class instances included) are written as their
 *   own enumerable properties.
 * - **Cycles** throw `UnserializableValueError` with the path of the repeating reference
 *   (like `/a/0/b`). An object referenced twice without a cycle is simply written twice.
 * - **Nesting** deeper than `MAX_NESTING` (1,000) objects, arrays, maps and sets throws
 *   `UnserializableValueError` instead of overflowing the call stack.
 *
 * The `$`-tags are not escaped: canonical JSON is only ever hashed, never parsed back, so
 * a user object `{"$date":"…"}` sharing its text with a `Date` only means both requests
 * carried the same information.
 */
import { UnserializableValueError } from './errors/UnserializableValueError.js';
import { ExactNumber } from './exactJson.js';
import { escapeSegment, type PointerSegment, PointerTrail, pathInMessage } from './PointerTrail.js';
import { MAX_NESTING } from './serializer.js';

const UNDEFINED_TAG = '{"$undefined":true}';

/** Where the writer is: its path, and the objects from the root down (each at its depth). */
interface Trail extends PointerTrail {
  ancestors: Map<object, number>;
  /** The levels above the caller's data (`outerLevels`): paths in errors start below them. */
  outer: number;
}

/** How `canonicalJson` reads its value. */
export interface CanonicalJsonOptions {
  /**
   * How many levels of the value the caller wrapped around the data it fingerprints (one
   * for `{ path, input }`): nesting is counted below them, so the data itself may be
   * `MAX_NESTING` (1,000) levels deep, and paths in errors start below them.
   * @default 0
   */
  outerLevels?: number;
}

/** Deterministic canonical JSON for fingerprints. See the module comment for the rules. */
export function canonicalJson(value: unknown, options: CanonicalJsonOptions = {}): string {
  const outer = options.outerLevels ?? 0;
  const trail = Object.assign(new PointerTrail(), { ancestors: new Map<object, number>(), outer });
  return write(value, '', trail) ?? UNDEFINED_TAG;
}

/**
 * Returns the canonical text of `value`, or `undefined` for a value JSON would drop
 * (undefined, a function, a symbol), leaving each caller to decide what the gap becomes.
 */
function write(value: unknown, key: string, trail: Trail): string | undefined {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return writeNumber(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      return `{"$bigint":${JSON.stringify(value.toString())}}`;
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
  }
  if (value === null) return 'null';

  // A number kept as its literal: a leaf, as every other number (the text its toJSON makes).
  if (value instanceof ExactNumber) return `{"$number":${JSON.stringify(value.canonical)}}`;
  let object = value as object;
  const toJSON = (object as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function' && !isTaggedType(object)) {
    // Like JSON.stringify: toJSON is applied once per position, and its result is
    // written as it is (an object's own toJSON is not called again).
    const replacement: unknown = toJSON.call(object, key);
    if (replacement === null || typeof replacement !== 'object') {
      return write(replacement, key, trail);
    }
    object = replacement;
  }

  const { ancestors } = trail;
  if (ancestors.size >= MAX_NESTING + trail.outer) {
    const path = trail.toString(undefined, trail.outer);
    throw new UnserializableValueError(
      path,
      `Cannot fingerprint a value nested more than ${MAX_NESTING} levels deep (at ${pathInMessage(path)}). ` +
        'Send flatter data.',
    );
  }
  const ancestorDepth = ancestors.get(object);
  if (ancestorDepth !== undefined) {
    const path = trail.toString(undefined, trail.outer);
    const ancestorPath = trail.toString(ancestorDepth, trail.outer);
    throw new UnserializableValueError(
      path,
      `Cannot fingerprint a value with a cycle: ${pathInMessage(path) || '/'} refers back to ` +
        `${pathInMessage(ancestorPath) || 'the root'}. Pass plain data (a tree): copy the fields the ` +
        'request needs into a new object instead of passing a linked structure.',
    );
  }
  ancestors.set(object, trail.segments.length);
  try {
    return writeObject(object, trail);
  } finally {
    ancestors.delete(object);
  }
}

/** Writes `value` one level down, at `segment` (left pushed when it throws: the walk ends). */
function writeBelow(
  value: unknown,
  key: string,
  segment: PointerSegment,
  trail: Trail,
): string | undefined {
  trail.segments.push(segment);
  const text = write(value, key, trail);
  trail.segments.pop();
  return text;
}

/** Types with a tag of their own, whose `toJSON` (Date's) is not used. */
function isTaggedType(object: object): boolean {
  return (
    object instanceof Date ||
    object instanceof Map ||
    object instanceof Set ||
    object instanceof Number ||
    object instanceof String ||
    object instanceof Boolean ||
    object instanceof BigInt
  );
}

function writeNumber(value: number): string {
  if (Number.isFinite(value)) return Object.is(value, -0) ? '0' : JSON.stringify(value);
  return `{"$number":"${Number.isNaN(value) ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity'}"}`;
}

function writeObject(object: object, trail: Trail): string | undefined {
  if (object instanceof Date) {
    const time = object.getTime();
    return `{"$date":${Number.isNaN(time) ? 'null' : JSON.stringify(object.toISOString())}}`;
  }
  if (object instanceof Map) {
    const entries = [...object].map(([entryKey, entryValue], index) => {
      const segment = () => segmentForMapKey(entryKey, index);
      return [
        writeBelow(entryKey, '', segment, trail) ?? UNDEFINED_TAG,
        writeBelow(entryValue, '', segment, trail) ?? UNDEFINED_TAG,
      ] as const;
    });
    entries.sort(
      ([keyA, valueA], [keyB, valueB]) => compare(keyA, keyB) || compare(valueA, valueB),
    );
    return `{"$map":[${entries.map(([k, v]) => `[${k},${v}]`).join(',')}]}`;
  }
  if (object instanceof Set) {
    const elements = [...object].map(
      (element, index) => writeBelow(element, '', index, trail) ?? UNDEFINED_TAG,
    );
    return `{"$set":[${elements.sort(compare).join(',')}]}`;
  }
  if (
    object instanceof Number ||
    object instanceof String ||
    object instanceof Boolean ||
    object instanceof BigInt
  ) {
    return write(object.valueOf(), '', trail);
  }
  if (Array.isArray(object)) {
    let text = '[';
    for (let index = 0; index < object.length; index++) {
      if (index > 0) text += ',';
      text += writeBelow(object[index], String(index), index, trail) ?? 'null';
    }
    return `${text}]`;
  }
  return writeProperties(object, trail);
}

function writeProperties(object: object, trail: Trail): string {
  let text = '{';
  let first = true;
  for (const name of sortedNames(Object.keys(object))) {
    const member = writeBelow((object as Record<string, unknown>)[name], name, name, trail);
    if (member === undefined) continue;
    text += `${first ? '' : ','}${JSON.stringify(name)}:${member}`;
    first = false;
  }
  return `${text}}`;
}

/** Up to this many names are sorted in place by insertion; more by `Array.prototype.sort`. */
const INSERTION_SORT_MAX = 16;

/**
 * `names` in UTF-16 code unit order. An object of a request has a few names: sorted in place,
 * they cost no allocation, where `sort` allocates about 0.9 KB of work space per call.
 */
function sortedNames(names: string[]): string[] {
  if (names.length > INSERTION_SORT_MAX) return names.sort(compare);
  for (let index = 1; index < names.length; index++) {
    const name = names[index] as string;
    let at = index - 1;
    while (at >= 0 && (names[at] as string) > name) {
      names[at + 1] = names[at] as string;
      at--;
    }
    names[at + 1] = name;
  }
  return names;
}

/** UTF-16 code unit order, which is what `<` does on strings. */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function segmentForMapKey(key: unknown, index: number): string {
  return typeof key === 'string' || typeof key === 'number' || typeof key === 'bigint'
    ? escapeSegment(String(key))
    : `<entry ${index}>`;
}
