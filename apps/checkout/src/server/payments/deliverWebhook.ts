import { IDEMPOTENT_REPLAYED_HEADER } from '@idem/core';
import type { AppDatabase } from '../db/openDatabase';
import { webhookDeliveries } from '../db/schema';
import type { PaymentSucceededEvent } from './paymentEvents';
import { signWebhook, WEBHOOK_SIGNATURE_HEADER, webhookSecret } from './webhookSignature';

/** Attempts of the first delivery before the provider gives up on an event. */
const MAX_ATTEMPTS = 6;
const FIRST_BACKOFF_MS = 500;

/**
 * The provider's side of a webhook: at-least-once delivery of `event` to `url`. It posts
 * until the shop answers (a 2xx, or a 4xx that retrying will not change), backing off
 * between attempts, and then delivers the same event once more, as a provider does when
 * its first delivery timed out on its side although the shop had handled it. Every POST
 * is signed when it is sent (`fakepay-signature`, see `webhookSignature`) and logged in
 * `webhook_deliveries`, with whether the shop answered it from the store.
 */
export async function deliverWebhook(
  db: AppDatabase,
  url: string,
  event: PaymentSucceededEvent,
): Promise<void> {
  // One body for every delivery: the same event, byte for byte.
  const body = JSON.stringify(event);
  const post = async (): Promise<number> => {
    let status = 0;
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
      status = response.status;
      replayed = response.headers.get(IDEMPOTENT_REPLAYED_HEADER) === 'true';
    } catch {
      // No answer (the server is starting or stopping): status 0, retried below.
    }
    await db.insert(webhookDeliveries).values({
      eventId: event.id,
      checkoutKey: event.data.checkoutKey,
      status,
      replayed,
    });
    return status;
  };

  let status = 0;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    status = await post();
    if (status >= 200 && status < 500) break;
    await new Promise((resolve) => setTimeout(resolve, FIRST_BACKOFF_MS * 2 ** (attempt - 1)));
  }
  if (status >= 200 && status < 300) await post();
}
