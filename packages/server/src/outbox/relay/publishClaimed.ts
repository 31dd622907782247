import { backoffDelay, type Random } from '@idem/core';
import { errorText } from '../internal/errorText.js';
import type { Publisher } from '../OutboxMessage.js';
import type { ClaimedEvent } from './claimBatch.js';
import type { Settlement } from './settleBatch.js';

export interface PublishPolicy {
  publisher: Publisher;
  maxAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  random: Random;
}

/** One claimed event after its publish: how to settle it, and the error if it failed. */
export interface PublishAttempt {
  settlement: Settlement;
  error?: unknown;
}

/**
 * Publishes one claimed event and decides what becomes of it. Never throws: a failure is
 * an outcome (retry later, dead-letter, or give back unchanged when the publisher says
 * it was unreachable).
 */
export async function publishClaimed(
  claimed: ClaimedEvent,
  policy: PublishPolicy,
): Promise<PublishAttempt> {
  const { id } = claimed.message;
  try {
    await policy.publisher.publish(claimed.message);
    return { settlement: { id, outcome: 'sent' } };
  } catch (error) {
    if (isTransient(policy.publisher, error)) {
      return { settlement: { id, outcome: 'release', error: errorText(error) }, error };
    }
    const attempts = claimed.attempts + 1;
    if (attempts >= policy.maxAttempts) {
      return { settlement: { id, outcome: 'dead', error: errorText(error) }, error };
    }
    const delayMs = backoffDelay({
      attempt: attempts - 1,
      baseDelayMs: policy.baseDelayMs,
      maxDelayMs: policy.maxDelayMs,
      random: policy.random,
    });
    return { settlement: { id, outcome: 'retry', error: errorText(error), delayMs }, error };
  }
}

function isTransient(publisher: Publisher, error: unknown): boolean {
  try {
    return publisher.isTransientError?.(error) === true;
  } catch {
    return false;
  }
}
