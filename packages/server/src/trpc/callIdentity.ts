import { isConfigurationError, isUnserializableValueError } from '@idem/core';
import { canonicalJson, sha256HexNow } from '@idem/core/store';
import { TRPCError } from '@trpc/server';
import { storedScope, UnstorablePrincipalError } from '../storedScope.js';
import { InputTooLargeError } from './InputTooLargeError.js';

const encoder = new TextEncoder();

/**
 * The stored scope (`storedScope`: the principal, then the procedure path), with its
 * failures as tRPC answers: no principal is the server's bug (500), a principal the store
 * cannot keep is the request's (400, nothing run).
 */
export function scopeOf(principal: unknown, path: string): string {
  try {
    return storedScope(principal, path, 'idempotent()');
  } catch (error) {
    if (error instanceof UnstorablePrincipalError) {
      throw new TRPCError({ code: 'BAD_REQUEST', message: error.message });
    }
    if (isConfigurationError(error)) {
      throw new TRPCError({ code: 'INTERNAL_SERVER_ERROR', message: error.message, cause: error });
    }
    throw error;
  }
}

/**
 * Core's fingerprint of `{ path, input }` (a string at once where node:crypto exists), from
 * the canonical JSON written once, after its size is checked.
 */
export function fingerprintWithin(
  request: { path: string; input: unknown },
  maxBytes: number,
): string | Promise<string> {
  let text: string;
  try {
    text = canonicalJson(request);
  } catch (error) {
    // Input nested past the limit (or a value JSON cannot hold, through createCaller): the
    // request is what is wrong, so a 400 that says so, before anything is stored.
    if (!isUnserializableValueError(error)) throw error;
    throw new TRPCError({
      code: 'BAD_REQUEST',
      message:
        `The input of "${request.path}" cannot be fingerprinted, so it was not run or ` +
        `stored: ${error.message}`,
      cause: error,
    });
  }
  // A UTF-16 code unit is one to three UTF-8 bytes: only text whose length leaves the
  // limit in doubt is encoded to count them.
  const bytes =
    text.length * 3 <= maxBytes || text.length > maxBytes
      ? text.length
      : encoder.encode(text).length;
  if (bytes > maxBytes) {
    const message =
      `The input of "${request.path}" is larger than ${maxBytes} bytes, the most this ` +
      'idempotent mutation accepts (maxInputBytes); it was not run or stored.';
    throw new TRPCError({
      code: 'PAYLOAD_TOO_LARGE',
      message,
      cause: new InputTooLargeError(message, maxBytes),
    });
  }
  return sha256HexNow(text);
}
