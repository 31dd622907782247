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
  const record: IdempotencyRecord = {
    scope,
    key,
    fingerprint: '',
    status: 'in_progress',
    version: Number.NaN,
    lockedUntil: null,
    attempts: Number.NaN,
    outcome: null,
    steps: {},
    createdAt: Number.NaN,
    completedAt: null,
    expiresAt: Number.NaN,
  };
  for (let index = 0; index < flat.length; index += 2) {
    // String(): a client whose type mapping answers Buffers still reads the same text.
    const name = String(flat[index]);
    const value = String(flat[index + 1]);
    switch (name) {
      case 'fingerprint':
        record.fingerprint = value;
        break;
      case 'status':
        record.status = value === 'completed' ? 'completed' : 'in_progress';
        break;
      case 'version':
        record.version = Number(value);
        break;
      case 'locked_until':
        record.lockedUntil = Number(value);
        break;
      case 'attempts':
        record.attempts = Number(value);
        break;
      case 'outcome':
        record.outcome = JSON.parse(value) as StoredOutcome;
        break;
      case 'created_at':
        record.createdAt = Number(value);
        break;
      case 'completed_at':
        record.completedAt = Number(value);
        break;
      case 'expires_at':
        record.expiresAt = Number(value);
        break;
      default:
        if (name.startsWith(STEP)) addStep(record.steps, name.slice(STEP.length), value);
    }
  }
  return record;
}

/** A recovery point's JSON under its name, whatever the name ("__proto__" included). */
function addStep(steps: Record<string, JsonValue>, name: string, json: string): void {
  Object.defineProperty(steps, name, {
    value: JSON.parse(json) as JsonValue,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}
