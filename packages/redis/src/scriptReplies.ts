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
  const record = recordOf(request.scope, request.key, third as unknown[]);
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

const STEP = 'step:';

/** The record `(scope, key)` from its Redis hash, as HGETALL lists it (name, value, …). */
export function recordOf(scope: string, key: string, flat: unknown[]): IdempotencyRecord {
  const fields = new Map<string, string>();
  const steps: Record<string, JsonValue> = {};
  for (let index = 0; index < flat.length; index += 2) {
    // String(): a client whose type mapping answers Buffers still reads the same text.
    const name = String(flat[index]);
    const value = String(flat[index + 1]);
    if (name.startsWith(STEP)) {
      // defineProperty: a plain assignment of "__proto__" would set the prototype instead.
      Object.defineProperty(steps, name.slice(STEP.length), {
        value: JSON.parse(value) as JsonValue,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    } else {
      fields.set(name, value);
    }
  }
  const number = (name: string) => Number(fields.get(name));
  const optional = (name: string) => (fields.has(name) ? number(name) : null);
  const outcome = fields.get('outcome');
  return {
    scope,
    key,
    fingerprint: fields.get('fingerprint') ?? '',
    status: fields.get('status') === 'completed' ? 'completed' : 'in_progress',
    version: number('version'),
    lockedUntil: optional('locked_until'),
    attempts: number('attempts'),
    outcome: outcome === undefined ? null : (JSON.parse(outcome) as StoredOutcome),
    steps,
    createdAt: number('created_at'),
    completedAt: optional('completed_at'),
    expiresAt: number('expires_at'),
  };
}
