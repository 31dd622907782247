import { UnserializableValueError } from './errors/UnserializableValueError.js';
import { type PointerSegment, PointerTrail } from './PointerTrail.js';
import type { JsonValue } from './record.js';

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

type Tag =
  | '$date'
  | '$bigint'
  | '$map'
  | '$set'
  | '$undefined'
  | '$number'
  | '$escaped'
  | '$string'
  | '$object';

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

function fromCodeUnits(units: number[]): string {
  let text = '';
  // In slices: spreading a huge array into one call would exceed the argument limit.
  for (let start = 0; start < units.length; start += 8192) {
    text += String.fromCharCode(...units.slice(start, start + 8192));
  }
  return text;
}

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
  deserialize: (json) => decode(json, new PointerTrail()),
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

/** `decode` one level down, at `segment` (left pushed when it throws: the walk ends). */
function decodeBelow(json: JsonValue, segment: PointerSegment, trail: PointerTrail): unknown {
  trail.segments.push(segment);
  const value = decode(json, trail);
  trail.segments.pop();
  return value;
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
        `Cannot store a ${typeof value} at ${path || 'the top level'}: an idempotent ` +
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
      `Cannot store a value nested more than ${MAX_NESTING} levels deep (at ${path}). An ` +
        'idempotent procedure must return data that can replay: flatten it.',
    );
  }
  if (ancestors.includes(object)) {
    const path = trail.toString();
    throw new UnserializableValueError(
      path,
      `Cannot store a value with a cycle: ${path} refers back to one of its ancestors. ` +
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
  return keys.length === 1 && keys[0]!.charCodeAt(0) === 36 ? { $escaped: result } : result;
}

function decode(json: JsonValue, trail: PointerTrail): unknown {
  if (json === null || typeof json !== 'object') return json;
  if (Array.isArray(json)) return json.map((item, index) => decodeBelow(item, index, trail));

  const keys = Object.keys(json);
  const onlyKey = keys.length === 1 ? keys[0] : undefined;
  if (onlyKey === undefined || !onlyKey.startsWith('$')) return decodeProperties(json, trail);

  const payload = json[onlyKey] as JsonValue;
  // From here on the trail points at the payload; a malformed tag throws, ending the walk.
  trail.segments.push(onlyKey);
  const value = decodeTagged(onlyKey, payload, trail);
  trail.segments.pop();
  return value;
}

function decodeTagged(tag: string, payload: JsonValue, trail: PointerTrail): unknown {
  switch (tag as Tag) {
    case '$escaped':
      if (!isPlainJsonObject(payload)) return malformed(trail, 'an object');
      return decodeProperties(payload, trail);
    case '$undefined':
      return payload === true ? undefined : malformed(trail, 'true');
    case '$number':
      switch (payload) {
        case 'NaN':
          return Number.NaN;
        case 'Infinity':
          return Number.POSITIVE_INFINITY;
        case '-Infinity':
          return Number.NEGATIVE_INFINITY;
        case '-0':
          return -0;
        default:
          return malformed(trail, '"NaN", "Infinity", "-Infinity" or "-0"');
      }
    case '$bigint':
      if (typeof payload !== 'string' || !/^-?\d+$/.test(payload)) {
        return malformed(trail, 'a string of decimal digits');
      }
      return BigInt(payload);
    case '$date': {
      if (payload === null) return new Date(Number.NaN);
      const date = typeof payload === 'string' ? new Date(payload) : undefined;
      if (!date || Number.isNaN(date.getTime())) {
        return malformed(trail, 'an ISO 8601 date string or null');
      }
      return date;
    }
    case '$map': {
      if (!Array.isArray(payload)) return malformed(trail, 'an array of [key, value] pairs');
      const map = new Map<unknown, unknown>();
      payload.forEach((entry, index) => {
        trail.segments.push(index);
        if (!Array.isArray(entry) || entry.length !== 2) malformed(trail, 'a [key, value] pair');
        const [key, value] = entry as [JsonValue, JsonValue];
        map.set(decodeBelow(key, 0, trail), decodeBelow(value, 1, trail));
        trail.segments.pop();
      });
      return map;
    }
    case '$string':
      if (!Array.isArray(payload) || !payload.every((unit) => Number.isInteger(unit))) {
        return malformed(trail, 'an array of UTF-16 code units');
      }
      return fromCodeUnits(payload as number[]);
    case '$object': {
      if (!Array.isArray(payload)) return malformed(trail, 'an array of [key, value] pairs');
      const object: Record<string, unknown> = {};
      payload.forEach((entry, index) => {
        trail.segments.push(index);
        if (!Array.isArray(entry) || entry.length !== 2) malformed(trail, 'a [key, value] pair');
        const [key, value] = entry as [JsonValue, JsonValue];
        const name = decodeBelow(key, 0, trail);
        if (typeof name !== 'string') {
          trail.segments.push(0);
          malformed(trail, 'a string key');
        }
        defineOwn(object, name as string, decodeBelow(value, 1, trail));
        trail.segments.pop();
      });
      return object;
    }
    case '$set': {
      if (!Array.isArray(payload)) return malformed(trail, 'an array');
      return new Set(payload.map((element, index) => decodeBelow(element, index, trail)));
    }
    default: {
      // serialize() escapes every one-key `$` object, so this was written by something else
      // (or by a newer version with a tag this one does not know).
      trail.segments.pop();
      const path = trail.toString();
      throw new UnserializableValueError(
        path,
        `Cannot deserialize ${path || 'the stored value'}: unknown tag "${tag}". The ` +
          'value was not written by taggedJsonSerializer, or by a newer version of @idem/core; ' +
          'use the same serializer (and version) for writing and reading.',
      );
    }
  }
}

function decodeProperties(json: { [key: string]: JsonValue }, trail: PointerTrail): object {
  const result: Record<string, unknown> = {};
  for (const key of Object.keys(json)) {
    defineOwn(result, key, decodeBelow(json[key] as JsonValue, key, trail));
  }
  return result;
}

function isPlainJsonObject(json: JsonValue): json is { [key: string]: JsonValue } {
  return json !== null && typeof json === 'object' && !Array.isArray(json);
}

function malformed(trail: PointerTrail, expected: string): never {
  const path = trail.toString();
  throw new UnserializableValueError(
    path,
    `Cannot deserialize the tag at ${path}: expected ${expected}. The stored value was ` +
      'changed or not written by taggedJsonSerializer.',
  );
}

/**
 * A plain assignment of `"__proto__"` would set the prototype instead of adding a
 * property: data would be lost, and stored input could pollute prototypes.
 */
function defineOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(target, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  } else {
    target[key] = value;
  }
}
