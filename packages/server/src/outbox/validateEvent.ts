import type { $ZodType } from 'zod/v4/core';
import { type EventIssue, InvalidEventError } from './errors/InvalidEventError.js';

/** An event that passed every check, ready to be written. */
export interface ValidEvent {
  topic: string;
  aggregateKey: string | null;
  headers: Record<string, string>;
  /** The payload as consumers will see it: the JSON value the schema accepted. */
  payload: unknown;
}

/** What `enqueue` accepts for one event, before the types are known to hold. */
export interface RawEvent {
  topic: unknown;
  payload?: unknown;
  aggregateKey?: unknown;
  headers?: unknown;
}

/**
 * `\u0000` and lone surrogates, as `JSON.stringify` escapes them: valid JSON, refused by
 * Postgres `jsonb`. The look-behind skips an escaped backslash followed by "u0000".
 */
const JSONB_UNSAFE_ESCAPE = /(?<!\\)(?:\\\\)*\\u(?:0000|d[89a-f][0-9a-f]{2})/i;

const MAX_AGGREGATE_KEY_LENGTH = 1_024;

/**
 * Checks one event against its topic's schema and the size limit. The payload is checked
 * after a JSON round trip, because JSON is what is stored and what consumers receive: a
 * payload whose schema only holds before encoding (a `Date`, say) is refused here rather
 * than failing in every consumer.
 */
export async function validateEvent(
  schemas: Readonly<Record<string, $ZodType>>,
  event: RawEvent,
  index: number,
  maxPayloadBytes: number,
): Promise<ValidEvent> {
  const topic = event?.topic;
  const where = (name: string) => eventName(name, index);
  if (typeof topic !== 'string' || !Object.hasOwn(schemas, topic)) {
    const known = Object.keys(schemas);
    throw new InvalidEventError(
      { reason: 'unknown_topic', topic: String(topic), index },
      `${where(String(topic))}: unknown topic. Known topics: ${
        known.length > 0 ? known.map((name) => `"${name}"`).join(', ') : 'none'
      }. Add it to defineEvents({ … }) first.`,
    );
  }

  const aggregateKey = event.aggregateKey ?? null;
  if (
    aggregateKey !== null &&
    (typeof aggregateKey !== 'string' ||
      aggregateKey.length === 0 ||
      aggregateKey.length > MAX_AGGREGATE_KEY_LENGTH)
  ) {
    throw new InvalidEventError(
      { reason: 'invalid_aggregate_key', topic, index },
      `${where(topic)}: aggregateKey must be a string of 1 to ${MAX_AGGREGATE_KEY_LENGTH} characters; got ${describe(aggregateKey)}.`,
    );
  }

  const headers = event.headers ?? {};
  if (!isHeaderRecord(headers)) {
    throw new InvalidEventError(
      { reason: 'invalid_headers', topic, index },
      `${where(topic)}: headers must be an object of string values, with names of printable ` +
        'ASCII other than ":" and values without line breaks or U+0000 (brokers carry them as ' +
        'message headers).',
    );
  }

  let json: string | undefined;
  try {
    json = JSON.stringify(event.payload);
  } catch (error) {
    throw new InvalidEventError(
      { reason: 'unserializable_payload', topic, index },
      `${where(topic)}: the payload cannot be encoded as JSON (${(error as Error).message}). ` +
        'Events travel as JSON: use plain data (strings for dates and big integers).',
      { cause: error },
    );
  }
  if (json === undefined || JSONB_UNSAFE_ESCAPE.test(json)) {
    throw new InvalidEventError(
      { reason: 'unserializable_payload', topic, index },
      `${where(topic)}: the payload cannot be stored as JSON: ${
        json === undefined
          ? 'it is undefined, a function or a symbol'
          : 'it holds U+0000 or a lone surrogate, which Postgres jsonb refuses'
      }.`,
    );
  }

  const payloadBytes = new TextEncoder().encode(json).byteLength;
  if (payloadBytes > maxPayloadBytes) {
    throw new InvalidEventError(
      { reason: 'payload_too_large', topic, index },
      `${where(topic)}: the payload is ${payloadBytes} bytes of JSON, over the limit of ` +
        `${maxPayloadBytes} bytes (maxPayloadBytes). Store large data elsewhere and send a reference.`,
    );
  }

  // Stored is the JSON value itself, not the schema's output: consumers parse it with the
  // same schema and get the same output.
  const payload: unknown = JSON.parse(json);
  await checkPayload(schemas[topic] as $ZodType, topic, index, payload);
  return { topic, aggregateKey, headers, payload };
}

/**
 * Runs the topic's schema on a payload and returns the schema's output.
 * @throws InvalidEventError (`invalid_payload`) listing what the schema found.
 */
export async function checkPayload(
  schema: $ZodType,
  topic: string,
  index: number,
  payload: unknown,
): Promise<unknown> {
  const result = await schema['~standard'].validate(payload);
  if (!result.issues) return result.value;
  const issues = result.issues.map(toEventIssue);
  const listed = issues
    .slice(0, 5)
    .map((issue) => (issue.path ? `${issue.path}: ${issue.message}` : issue.message))
    .join('; ');
  throw new InvalidEventError(
    { reason: 'invalid_payload', topic, index, issues },
    `${eventName(topic, index)}: the payload does not match the topic's schema: ${listed}${
      issues.length > 5 ? `; and ${issues.length - 5} more` : ''
    }.`,
  );
}

function eventName(topic: string, index: number): string {
  return `Event "${topic}"${index > 0 ? ` (index ${index})` : ''}`;
}

function toEventIssue(issue: {
  message: string;
  path?: ReadonlyArray<PropertyKey | { key: PropertyKey }> | undefined;
}): EventIssue {
  const path = (issue.path ?? [])
    .map((segment) => String(typeof segment === 'object' ? segment.key : segment))
    .join('.');
  return { path, message: issue.message };
}

const HEADER_NAME = /^[!-9;-~]+$/;
/** Line breaks would split a header; U+0000 cannot be stored. */
const headerValueAllowed = (value: string) =>
  !value.includes('\r') && !value.includes('\n') && !value.includes('\u0000');

function isHeaderRecord(value: unknown): value is Record<string, string> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  return Object.entries(value).every(
    ([name, item]) =>
      HEADER_NAME.test(name) && typeof item === 'string' && headerValueAllowed(item),
  );
}

function describe(value: unknown): string {
  return typeof value === 'string'
    ? `"${value.slice(0, 40)}" (${value.length} characters)`
    : typeof value;
}
