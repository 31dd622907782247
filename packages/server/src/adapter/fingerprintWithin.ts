import { isUnserializableValueError } from '@idem/core';
import { canonicalJson, sha256HexNow } from '@idem/core/store';
import { InputTooLargeError } from './InputTooLargeError.js';
import { type Refusal, refusalOf, unfingerprintable } from './refusals.js';

const encoder = new TextEncoder();

/** A request's fingerprint (a string at once where node:crypto exists), or why it has none. */
export type Fingerprinted =
  | { ok: true; fingerprint: string | Promise<string> }
  | { ok: false; refusal: Refusal; cause: Error };

/** Where an adapter's fingerprinted value holds the request's data, and how big it may be. */
export interface FingerprintLimits {
  /** The largest canonical JSON accepted, in UTF-8 bytes. @default no limit */
  maxBytes?: number | undefined;
  /**
   * The levels the adapter wrapped around the request's data (`{ path, input }` is one):
   * the data itself may nest 1,000 levels, and error paths start inside it.
   */
  outerLevels: number;
}

/**
 * Core's fingerprint of `value` (what makes two requests the same), from its canonical JSON
 * written once and, with `maxBytes`, measured first. A value nested past the limit, or over
 * `maxBytes`, is the request's fault: a refusal (400, 413) before anything is stored.
 * `subject` names the request in the refusal, e.g. `the input of "orders.create"`.
 */
export function fingerprintWithin(
  value: unknown,
  subject: string,
  { maxBytes = Number.POSITIVE_INFINITY, outerLevels }: FingerprintLimits,
): Fingerprinted {
  let text: string;
  try {
    text = canonicalJson(value, { outerLevels });
  } catch (error) {
    return notFingerprinted(error, subject);
  }
  // A UTF-16 code unit is one to three UTF-8 bytes: only text whose length leaves the
  // limit in doubt is encoded to count them.
  const bytes =
    text.length * 3 <= maxBytes || text.length > maxBytes
      ? text.length
      : encoder.encode(text).length;
  if (bytes > maxBytes) {
    const cause = new InputTooLargeError(
      `${capitalized(subject)} is larger than ${maxBytes} bytes, the most this idempotent ` +
        'mutation accepts (maxInputBytes); it was not run or stored.',
      maxBytes,
    );
    return { ok: false, refusal: refusalOf(cause) as Refusal, cause };
  }
  return { ok: true, fingerprint: sha256HexNow(text) };
}

/**
 * The refusal of a request whose data cannot be fingerprinted (`UnserializableValueError`:
 * nested too deep); any other error is rethrown.
 */
export function notFingerprinted(error: unknown, subject: string): Fingerprinted & { ok: false } {
  if (!isUnserializableValueError(error)) throw error;
  const message = `${capitalized(subject)} cannot be fingerprinted, so it was not run or stored: ${error.message}`;
  return { ok: false, refusal: unfingerprintable(message), cause: error };
}

function capitalized(text: string): string {
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}`;
}
