import { backoffDelay, type Random } from '@idem/core';
import { errorText } from '../internal/errorText.js';
import type { OutboxMessage, Publisher, PublishResult } from '../OutboxMessage.js';
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
 * Publishes a claimed batch (through `publishBatch` when the publisher has it) and decides
 * what becomes of each event, in the batch's order. Never throws: a failure is an outcome
 * (retry later, dead-letter, or give back unchanged when the publisher says it was
 * unreachable), and one event's failure is that event's alone.
 */
export async function publishClaimed(
  claimed: readonly ClaimedEvent[],
  policy: PublishPolicy,
): Promise<PublishAttempt[]> {
  const messages = claimed.map((event) => event.message);
  const results = await publishAll(policy.publisher, messages);
  return claimed.map((event, index) => {
    const result = results[index];
    return decide(event, policy, result ?? missingResult(event.message));
  });
}

async function publishAll(
  publisher: Publisher,
  messages: readonly OutboxMessage[],
): Promise<PublishResult[]> {
  if (publisher.publishBatch) {
    try {
      return await publisher.publishBatch(messages);
    } catch (error) {
      return messages.map(() => ({ ok: false, error }));
    }
  }
  const settled = await Promise.allSettled(messages.map((message) => publisher.publish(message)));
  return settled.map((outcome) =>
    outcome.status === 'fulfilled' ? { ok: true } : { ok: false, error: outcome.reason },
  );
}

function missingResult(message: OutboxMessage): PublishResult {
  return {
    ok: false,
    error: new Error(
      `publishBatch returned no result for event ${message.id}; it must return one per message, in order.`,
    ),
  };
}

function decide(
  claimed: ClaimedEvent,
  policy: PublishPolicy,
  result: PublishResult,
): PublishAttempt {
  const { id } = claimed.message;
  if (result.ok) return { settlement: { id, seq: claimed.seq, outcome: 'sent' } };
  const { error } = result;
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

function isTransient(publisher: Publisher, error: unknown): boolean {
  try {
    return publisher.isTransientError?.(error) === true;
  } catch {
    return false;
  }
}
