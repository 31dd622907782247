import type { JsonValue } from '@idem/core';
import {
  type ClaimRequest,
  type ClaimResult,
  decideClaim,
  type IdempotencyRecord,
  type StoredOutcome,
} from '@idem/core/store';

// What the scripts answer, read back into the store's terms.

/** What the claim script answered: claimed (it wrote), or the record for the claim table. */
export function claimResultOf(request: ClaimRequest, reply: unknown): ClaimResult {
  const [answer, now, third, lockedUntil, expiresAt] = reply as unknown[];
  // String(): a client whose type mapping answers Buffers still reads the same text.
  const kind = String(answer);
  if (kind === 'fresh') {
    return {
      status: 'claimed',
      takeover: false,
      record: freshRecord(request, Number(String(now)), Number(String(third)), {
        lockedUntil: Number(String(lockedUntil)),
        expiresAt: Number(String(expiresAt)),
      }),
    };
  }
  const record = recordOf(request.scope, request.key, String(third));
  if (kind === 'takeover') return { status: 'claimed', takeover: true, record };
  const decision = decideClaim(record, request, Number(String(now)));
  if (decision.status === 'claimed') {
    throw new Error(
      `redisStore: the claim script left "${request.key}" unclaimed where the claim table claims it; this is a bug in @idem/redis.`,
    );
  }
  return decision;
}

/**
 * The record a fresh claim wrote: the request's fingerprint, version `version`, one
 * attempt, no steps, created at `now`, with the lease's end and the record's end as the
 * script stored them.
 */
function freshRecord(
  request: ClaimRequest,
  now: number,
  version: number,
  ends: { lockedUntil: number; expiresAt: number },
): IdempotencyRecord {
  return {
    scope: request.scope,
    key: request.key,
    fingerprint: request.fingerprint,
    status: 'in_progress',
    version,
    lockedUntil: ends.lockedUntil,
    attempts: 1,
    outcome: null,
    steps: {},
    createdAt: now,
    completedAt: null,
    expiresAt: ends.expiresAt,
  };
}

/**
 * The record `(scope, key)` from the lines the scripts store it as: a header of numbers,
 * the fingerprint as a JSON string, the outcome's JSON (empty while in progress), and one
 * `[name, value]` JSON line per recovery point (a later line of a name wins).
 */
export function recordOf(scope: string, key: string, text: string): IdempotencyRecord {
  const headerEnd = text.indexOf('\n');
  const fingerprintEnd = text.indexOf('\n', headerEnd + 1);
  const outcomeEnd = text.indexOf('\n', fingerprintEnd + 1);
  if (outcomeEnd < 0) {
    throw new Error(
      `redisStore: the record of "${key}" in scope "${scope}" is not in the store's layout; this is a bug in @idem/redis, or another program wrote the key.`,
    );
  }
  const [status, version, createdAt, lockedUntil, expiresAt, attempts, completedAt] = text
    .slice(0, headerEnd)
    .split(' ');
  const outcome = text.slice(fingerprintEnd + 1, outcomeEnd);
  const steps: Record<string, JsonValue> = {};
  for (let start = outcomeEnd + 1; start < text.length; ) {
    const end = text.indexOf('\n', start);
    const [name, value] = JSON.parse(text.slice(start, end)) as [string, JsonValue];
    addStep(steps, name, value);
    start = end + 1;
  }
  return {
    scope,
    key,
    fingerprint: JSON.parse(text.slice(headerEnd + 1, fingerprintEnd)) as string,
    status: status === 'completed' ? 'completed' : 'in_progress',
    version: Number(version),
    lockedUntil: lockedUntil === '-' ? null : Number(lockedUntil),
    attempts: Number(attempts),
    outcome: outcome === '' ? null : (JSON.parse(outcome) as StoredOutcome),
    steps,
    createdAt: Number(createdAt),
    completedAt: completedAt === '-' ? null : Number(completedAt),
    expiresAt: Number(expiresAt),
  };
}

/** A recovery point's value under its name, whatever the name ("__proto__" included). */
function addStep(steps: Record<string, JsonValue>, name: string, value: JsonValue): void {
  Object.defineProperty(steps, name, {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}
