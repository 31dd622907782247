import { UnserializableValueError } from './errors/UnserializableValueError.js';
import { type PointerSegment, PointerTrail } from './PointerTrail.js';
import type { JsonValue } from './store/record.js';

/** The tags `taggedJsonSerializer` writes (see its table), each an object's only key. */
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

function fromCodeUnits(units: number[]): string {
  let text = '';
  // In slices: spreading a huge array into one call would exceed the argument limit.
  for (let start = 0; start < units.length; start += 8192) {
    text += String.fromCharCode(...units.slice(start, start + 8192));
  }
  return text;
}

/** `decode` one level down, at `segment` (left pushed when it throws: the walk ends). */
function decodeBelow(json: JsonValue, segment: PointerSegment, trail: PointerTrail): unknown {
  trail.segments.push(segment);
  const value = decode(json, trail);
  trail.segments.pop();
  return value;
}

/**
 * `taggedJsonSerializer.deserialize`: the value `json` encodes. A malformed or unknown tag
 * throws `UnserializableValueError` with the JSON Pointer of where it sits.
 */
export function decodeTaggedJson(json: JsonValue): unknown {
  return decode(json, new PointerTrail());
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
      return decodeSpecialNumber(payload, trail);
    case '$bigint':
      if (typeof payload !== 'string' || !/^-?\d+$/.test(payload)) {
        return malformed(trail, 'a string of decimal digits');
      }
      return BigInt(payload);
    case '$date':
      return decodeDate(payload, trail);
    case '$map':
      return decodeMap(payload, trail);
    case '$string':
      if (!Array.isArray(payload) || !payload.every((unit) => Number.isInteger(unit))) {
        return malformed(trail, 'an array of UTF-16 code units');
      }
      return fromCodeUnits(payload as number[]);
    case '$object':
      return decodeObject(payload, trail);
    case '$set':
      if (!Array.isArray(payload)) return malformed(trail, 'an array');
      return new Set(payload.map((element, index) => decodeBelow(element, index, trail)));
    default:
      return unknownTag(tag, trail);
  }
}

function decodeSpecialNumber(payload: JsonValue, trail: PointerTrail): number {
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
}

function decodeDate(payload: JsonValue, trail: PointerTrail): Date {
  if (payload === null) return new Date(Number.NaN);
  const date = typeof payload === 'string' ? new Date(payload) : undefined;
  if (!date || Number.isNaN(date.getTime())) {
    return malformed(trail, 'an ISO 8601 date string or null');
  }
  return date;
}

function decodeMap(payload: JsonValue, trail: PointerTrail): Map<unknown, unknown> {
  const map = new Map<unknown, unknown>();
  forEachPair(payload, trail, (key, value) => {
    map.set(decodeBelow(key, 0, trail), decodeBelow(value, 1, trail));
  });
  return map;
}

function decodeObject(payload: JsonValue, trail: PointerTrail): object {
  const object: Record<string, unknown> = {};
  forEachPair(payload, trail, (key, value) => {
    const name = decodeBelow(key, 0, trail);
    if (typeof name !== 'string') {
      trail.segments.push(0);
      malformed(trail, 'a string key');
    }
    defineOwn(object, name, decodeBelow(value, 1, trail));
  });
  return object;
}

/** Calls `each` with every `[key, value]` pair of `payload`, the trail at the pair. */
function forEachPair(
  payload: JsonValue,
  trail: PointerTrail,
  each: (key: JsonValue, value: JsonValue) => void,
): void {
  if (!Array.isArray(payload)) malformed(trail, 'an array of [key, value] pairs');
  payload.forEach((entry, index) => {
    trail.segments.push(index);
    if (!Array.isArray(entry) || entry.length !== 2) malformed(trail, 'a [key, value] pair');
    const [key, value] = entry as [JsonValue, JsonValue];
    each(key, value);
    trail.segments.pop();
  });
}

/**
 * serialize() escapes every one-key `$` object, so this was written by something else (or by
 * a newer version with a tag this one does not know).
 */
function unknownTag(tag: string, trail: PointerTrail): never {
  trail.segments.pop();
  const path = trail.toString();
  throw new UnserializableValueError(
    path,
    `Cannot deserialize ${path || 'the stored value'}: unknown tag "${tag}". The ` +
      'value was not written by taggedJsonSerializer, or by a newer version of @idem/core; ' +
      'use the same serializer (and version) for writing and reading.',
  );
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
export function defineOwn(target: Record<string, unknown>, key: string, value: unknown): void {
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
