import { backoffDelay, IDEMPOTENT_REPLAYED_HEADER, parseRetryAfter } from '@idem/core';
import type { AppDatabase } from '../db/openDatabase';
import { webhookDeliveries } from '../db/schema';
import type { PaymentSucceededEvent } from './paymentEvents';
import { signWebhook, WEBHOOK_SIGNATURE_HEADER, webhookSecret } from './webhookSignature';

/** Attempts of the first delivery before the provider gives up on an event. */
const MAX_ATTEMPTS = 6;
/** The ceiling of the first backoff; it doubles with every retry, up to the next. */
const FIRST_BACKOFF_MS = 500;
const MAX_BACKOFF_MS = 8_000;
/** The longest `Retry-After` the provider honours; a longer one waits this long. */
const MAX_RETRY_AFTER_MS = 60_000;

/** The shop's answer to one delivery: its status (0 for none) and its `Retry-After`. */
export interface DeliveryAnswer {
  status: number;
  retryAfter: string | null;
}

/**
 * What the provider does after the `retry`-th answer (0 for the first): `undefined` when
 * the answer settles the delivery, else how long to wait before sending it again.
 * - 2xx: delivered. Any other 4xx: the shop refused the event, and sending it again
 *   changes nothing.
 * - 409 (the event's first delivery still holds its key), 408, 425 and 429: again after
 *   the answer's `Retry-After`, or after a backoff when it has none.
 * - No answer, or a 5xx: again after a backoff (exponential, with full jitter), as real
 *   providers retry a shop that failed, whatever it may have done before failing.
 */
export function redeliveryDelayMs(
  answer: DeliveryAnswer,
  retry: number,
  { nowMs = Date.now(), random = Math.random } = {},
): number | undefined {
  const { status } = answer;
  const backoffMs = () =>
    backoffDelay({
      attempt: retry,
      baseDelayMs: FIRST_BACKOFF_MS,
      maxDelayMs: MAX_BACKOFF_MS,
      random,
    });
  if (status === 0 || status >= 500) return backoffMs();
  if (status === 408 || status === 409 || status === 425 || status === 429) {
    const retryAfterMs = parseRetryAfter(answer.retryAfter, nowMs);
    return retryAfterMs === undefined ? backoffMs() : Math.min(retryAfterMs, MAX_RETRY_AFTER_MS);
  }
  return undefined;
}

/**
 * The provider's side of a webhook: at-least-once delivery of `event` to `url`. It posts
 * until the shop answers for good (see `redeliveryDelayMs`: a 409 is sent again after its
 * `Retry-After`, a 5xx or no answer after a backoff), and then delivers the same event once
 * more, as a provider does when its first delivery timed out on its side although the shop
 * had handled it. Every POST carries the same bytes, is signed when it is sent
 * (`fakepay-signature`, see `webhookSignature`) and is logged in `webhook_deliveries`, with
 * whether the shop answered it from the store.
 */
export async function deliverWebhook(
  db: AppDatabase,
  url: string,
  event: PaymentSucceededEvent,
): Promise<void> {
  // One body for every delivery: the same event, byte for byte.
  const body = JSON.stringify(event);
  const post = async (): Promise<DeliveryAnswer> => {
    const answer: DeliveryAnswer = { status: 0, retryAfter: null };
    let replayed = false;
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'fakepay-webhooks/1',
          [WEBHOOK_SIGNATURE_HEADER]: signWebhook(body, webhookSecret()),
        },
        body,
      });
      await response.arrayBuffer();
      answer.status = response.status;
      answer.retryAfter = response.headers.get('retry-after');
      replayed = response.headers.get(IDEMPOTENT_REPLAYED_HEADER) === 'true';
    } catch {
      // No answer (the server is starting or stopping): status 0, retried below.
    }
    await db.insert(webhookDeliveries).values({
      eventId: event.id,
      checkoutKey: event.data.checkoutKey,
      status: answer.status,
      replayed,
    });
    return answer;
  };

  let answer = await post();
  for (let retry = 0; retry < MAX_ATTEMPTS - 1; retry++) {
    const delayMs = redeliveryDelayMs(answer, retry);
    if (delayMs === undefined) break;
    await new Promise((resolve) => setTimeout(resolve, delayMs));
    answer = await post();
  }
  if (answer.status >= 200 && answer.status < 300) await post();
}
