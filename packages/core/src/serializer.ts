import { UnserializableValueError } from './errors/UnserializableValueError.js';
import { type PointerSegment, PointerTrail, pathInMessage } from './PointerTrail.js';
import type { JsonValue } from './store/record.js';
import { decodeTaggedJson, defineOwn } from './taggedJsonDecode.js';

/**
 * Turns what a procedure returned into JSON a store can keep, and back. A replay hands
 * the client `deserialize(serialize(value))`, so a serializer decides which types a
 * replayed response keeps.
 */
export interface Serializer {
  /** Throws `UnserializableValueError` (with a path) for a value it cannot keep. */
  serialize(value: unknown): JsonValue;
  deserialize(json: JsonValue): unknown;
}

/**
 * The deepest nesting of objects, arrays, maps and sets `serialize` keeps. Deeper values
 * are refused with `UnserializableValueError` instead of overflowing the call stack, and
 * Postgres refuses `jsonb` nested much deeper anyway.
 */
export const MAX_NESTING = 1_000;

/** U+0000 or a lone surrogate: valid in a JS string, refused by Postgres `jsonb`. */
const UNSTORABLE_TEXT =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: U+0000 is what this must find.
  /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Where `UNSTORABLE_TEXT` might match: U+0000 or any surrogate, paired or not. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: U+0000 is what this must find.
const SUSPECT_TEXT = /[\u0000\ud800-\udfff]/;

/**
 * `UNSTORABLE_TEXT.test(text)`, cheaper for the text most values hold (no U+0000, no
 * surrogates): short text is scanned by a loop, long text by a one-class regex, and only
 * text with a suspect code unit goes through the full pattern.
 */
function isUnstorable(text: string): boolean {
  if (text.length > 32) return SUSPECT_TEXT.test(text) && UNSTORABLE_TEXT.test(text);
  for (let index = 0; index < text.length; index++) {
    const unit = text.charCodeAt(index);
    if (unit === 0 || (unit >= 0xd800 && unit <= 0xdfff)) return UNSTORABLE_TEXT.test(text);
  }
  return false;
}

/** A string every store keeps: as it is, or as its UTF-16 code units when it must be. */
function encodeString(text: string): JsonValue {
  if (!isUnstorable(text)) return text;
  const units: number[] = [];
  for (let index = 0; index < text.length; index++) units.push(text.charCodeAt(index));
  return { $string: units };
}

/** The stacks of one `serialize` walk: its path and the objects from the root down. */
interface Walk {
  trail: PointerTrail;
  ancestors: object[];
}

/** A finished walk's stacks (empty), for the next one: most calls allocate neither. */
let idleWalk: Walk | undefined;

/**
 * A lossless JSON encoding: everything a superjson-based tRPC app returns replays as the
 * same types. Values JSON cannot hold become an object with one `$`-tag:
 *
 * | value | stored as |
 * |---|---|
 * | `Date` | `{"$date":"2024-01-02T03:04:05.000Z"}` (`null` for an invalid date) |
 * | `BigInt` | `{"$bigint":"123"}` |
 * | `Map` | `{"$map":[[key,value],…]}` (insertion order) |
 * | `Set` | `{"$set":[…]}` (insertion order) |
 * | `undefined` (top level, property, array element or hole) | `{"$undefined":true}` |
 * | `NaN`, `Infinity`, `-Infinity`, `-0` | `{"$number":"NaN"}` etc. |
 * | a user object with exactly one key, starting with `$` | `{"$escaped":{…}}` |
 * | a string holding U+0000 or a lone surrogate (Postgres `jsonb` refuses both) | `{"$string":[UTF-16 code units]}` |
 * | an object with such a string as a key | `{"$object":[[key,value],…]}` |
 *
 * The escape makes the encoding unambiguous: any plain data round-trips exactly, even
 * `{"$date":"not a tag"}`. Array holes come back as `undefined` elements, boxed
 * primitives come back unboxed, and an object referenced twice comes back as two equal
 * copies. Other objects are stored the way `JSON.stringify` writes them (`toJSON()`, or
 * their own enumerable properties) and come back as plain objects. Cycles, functions,
 * symbols and nesting deeper than `MAX_NESTING` (1,000) levels throw
 * `UnserializableValueError`.
 */
export const taggedJsonSerializer: Serializer = {
  serialize(value) {
    // A toJSON may serialize while a walk is under way: that call takes a walk of its own.
    const walk = idleWalk ?? { trail: new PointerTrail(), ancestors: [] };
    idleWalk = undefined;
    try {
      return encode(value, walk.trail, walk.ancestors);
    } finally {
      // A walk that threw left its stacks pushed.
      walk.trail.segments.length = 0;
      walk.ancestors.length = 0;
      idleWalk = walk;
    }
  },
  deserialize: decodeTaggedJson,
};

/** `encode` one level down, at `segment` (left pushed when it throws: the walk ends). */
function encodeBelow(
  value: unknown,
  segment: PointerSegment,
  trail: PointerTrail,
  ancestors: object[],
): JsonValue {
  trail.segments.push(segment);
  const json = encode(value, trail, ancestors);
  trail.segments.pop();
  return json;
}

/**
 * `ancestors` are the objects from the root down to `value`'s parent: a stack, searched
 * for a cycle only as deep as the value is (at most `MAX_NESTING`), and allocation-free
 * unlike a `Set`.
 */
function encode(value: unknown, trail: PointerTrail, ancestors: object[]): JsonValue {
  switch (typeof value) {
    case 'string':
      return encodeString(value);
    case 'boolean':
      return value;
    case 'number':
      if (Number.isNaN(value)) return { $number: 'NaN' };
      if (value === Number.POSITIVE_INFINITY) return { $number: 'Infinity' };
      if (value === Number.NEGATIVE_INFINITY) return { $number: '-Infinity' };
      return Object.is(value, -0) ? { $number: '-0' } : value;
    case 'bigint':
      return { $bigint: value.toString() };
    case 'undefined':
      return { $undefined: true };
    case 'function':
    case 'symbol': {
      const path = trail.toString();
      throw new UnserializableValueError(
        path,
        `Cannot store a ${typeof value} at ${pathInMessage(path) || 'the top level'}: an idempotent ` +
          'procedure must return data that can replay. Return plain data (objects, arrays, ' +
          'strings, numbers, Date, BigInt, Map, Set) instead.',
      );
    }
  }
  if (value === null) return null;

  let object = value as object;
  const prototype: unknown = Object.getPrototypeOf(object);
  // Plain objects and arrays (most of what is stored) are no boxed primitive: skip the checks.
  if (
    prototype !== Object.prototype &&
    prototype !== Array.prototype &&
    prototype !== null &&
    (object instanceof Number ||
      object instanceof String ||
      object instanceof Boolean ||
      object instanceof BigInt)
  ) {
    return encode(object.valueOf(), trail, ancestors);
  }
  const toJSON = (object as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function' && !(object instanceof Date)) {
    const replacement: unknown = toJSON.call(object, '');
    if (replacement === null || typeof replacement !== 'object') {
      return encode(replacement, trail, ancestors);
    }
    object = replacement;
  }

  if (ancestors.length >= MAX_NESTING) {
    const path = trail.toString();
    throw new UnserializableValueError(
      path,
      `Cannot store a value nested more than ${MAX_NESTING} levels deep (at ${pathInMessage(path)}). An ` +
        'idempotent procedure must return data that can replay: flatten it.',
    );
  }
  if (ancestors.includes(object)) {
    const path = trail.toString();
    throw new UnserializableValueError(
      path,
      `Cannot store a value with a cycle: ${pathInMessage(path)} refers back to one of its ancestors. ` +
        'An idempotent procedure must return plain data (a tree): copy the fields the ' +
        'response needs into a new object.',
    );
  }
  ancestors.push(object);
  // Left pushed when it throws: the walk ends.
  const json = encodeObject(object, trail, ancestors);
  ancestors.pop();
  return json;
}

function encodeObject(object: object, trail: PointerTrail, ancestors: object[]): JsonValue {
  const prototype: unknown = Object.getPrototypeOf(object);
  if (prototype === Object.prototype || prototype === null) {
    return encodeProperties(object, trail, ancestors);
  }
  if (object instanceof Date) {
    const time = object.getTime();
    return { $date: Number.isNaN(time) ? null : object.toISOString() };
  }
  if (object instanceof Map) {
    trail.segments.push('$map');
    const entries = [...object].map(([key, value], index): JsonValue => {
      trail.segments.push(index);
      const pair = [encodeBelow(key, 0, trail, ancestors), encodeBelow(value, 1, trail, ancestors)];
      trail.segments.pop();
      return pair;
    });
    trail.segments.pop();
    return { $map: entries };
  }
  if (object instanceof Set) {
    trail.segments.push('$set');
    const elements = [...object].map((element, index) =>
      encodeBelow(element, index, trail, ancestors),
    );
    trail.segments.pop();
    return { $set: elements };
  }
  if (Array.isArray(object)) {
    const items: JsonValue[] = [];
    // An index loop, not map(): map() skips holes, and a hole must come back as undefined.
    for (let index = 0; index < object.length; index++) {
      items.push(encodeBelow(object[index], index, trail, ancestors));
    }
    return items;
  }
  return encodeProperties(object, trail, ancestors);
}

/** An object as its own enumerable properties, the way `JSON.stringify` writes it. */
function encodeProperties(object: object, trail: PointerTrail, ancestors: object[]): JsonValue {
  const keys = Object.keys(object);
  if (keys.some(isUnstorable)) {
    return {
      $object: keys.map((key) => [
        encodeString(key),
        encodeBelow((object as Record<string, unknown>)[key], key, trail, ancestors),
      ]),
    };
  }
  const result: { [key: string]: JsonValue } = {};
  for (const key of keys) {
    const value = (object as Record<string, unknown>)[key];
    defineOwn(result, key, encodeBelow(value, key, trail, ancestors));
  }
  // One key starting with "$" (code unit 36) would read back as a tag: escaped.
  return keys.length === 1 && keys[0]?.charCodeAt(0) === 36 ? { $escaped: result } : result;
}
