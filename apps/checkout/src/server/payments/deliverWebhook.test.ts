import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PGlite } from '@electric-sql/pglite';
import { asc } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/pglite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateApp } from '../db/migrateApp';
import type { AppDatabase } from '../db/openDatabase';
import { webhookDeliveries } from '../db/schema';
import { deliverWebhook, redeliveryDelayMs } from './deliverWebhook';
import type { PaymentSucceededEvent } from './paymentEvents';
import { verifyWebhook, WEBHOOK_SIGNATURE_HEADER, webhookSecret } from './webhookSignature';

const NOW = Date.UTC(2026, 11, 1, 12);
/** `random` at its top: the backoff's whole window. */
const top = { nowMs: NOW, random: () => 0.999_999 };

describe('when the provider sends a webhook again', () => {
  it.each([
    { status: 200, retryAfter: null, delay: undefined, why: 'delivered' },
    { status: 204, retryAfter: null, delay: undefined, why: 'delivered' },
    {
      status: 400,
      retryAfter: null,
      delay: undefined,
      why: 'refused: sending it again changes nothing',
    },
    {
      status: 401,
      retryAfter: null,
      delay: undefined,
      why: 'refused: sending it again changes nothing',
    },
    {
      status: 422,
      retryAfter: null,
      delay: undefined,
      why: 'refused: sending it again changes nothing',
    },
    { status: 409, retryAfter: '2', delay: 2_000, why: 'busy: after its Retry-After' },
    {
      status: 409,
      retryAfter: 'Tue, 01 Dec 2026 12:00:03 GMT',
      delay: 3_000,
      why: 'busy: after its Retry-After date',
    },
    { status: 429, retryAfter: '1', delay: 1_000, why: 'throttled: after its Retry-After' },
    {
      status: 409,
      retryAfter: '3600',
      delay: 60_000,
      why: 'busy: a Retry-After past a minute waits a minute',
    },
    { status: 409, retryAfter: null, delay: 2_000, why: 'busy without Retry-After: a backoff' },
    { status: 500, retryAfter: null, delay: 2_000, why: 'failed: a backoff' },
    { status: 503, retryAfter: '30', delay: 2_000, why: 'failed: a backoff' },
    { status: 0, retryAfter: null, delay: 2_000, why: 'no answer: a backoff' },
  ])('$status ($why)', ({ status, retryAfter, delay }) => {
    const waited = redeliveryDelayMs({ status, retryAfter }, 2, top);
    if (delay === undefined) expect(waited).toBeUndefined();
    else expect(waited).toBeCloseTo(delay, 0);
  });

  it('backs off exponentially, with full jitter, up to a ceiling', () => {
    const failed = { status: 502, retryAfter: null };
    expect(
      [0, 1, 2, 3, 4, 5].map((retry) => Math.round(redeliveryDelayMs(failed, retry, top) ?? -1)),
    ).toEqual([500, 1_000, 2_000, 4_000, 8_000, 8_000]);
    expect(redeliveryDelayMs(failed, 3, { nowMs: NOW, random: () => 0 })).toBe(0);
  });
});

describe('deliverWebhook against a shop that is busy, then fails, then answers', () => {
  let client: PGlite;
  let db: AppDatabase;
  let shop: Server;
  /** The shop's answers, in order; the last one repeats. */
  const answers = [
    { status: 409, headers: { 'retry-after': '1' } },
    { status: 503, headers: {} },
    { status: 200, headers: {} },
    { status: 200, headers: { 'idempotent-replayed': 'true' } },
  ];
  const received: { body: string; signature: string | undefined; at: number }[] = [];

  beforeAll(async () => {
    client = new PGlite();
    db = drizzle(client) as unknown as AppDatabase;
    await migrateApp(db);
    shop = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const signature = request.headers[WEBHOOK_SIGNATURE_HEADER];
        received.push({
          body: Buffer.concat(chunks).toString('utf8'),
          signature: typeof signature === 'string' ? signature : undefined,
          at: performance.now(),
        });
        const answer = answers[Math.min(received.length, answers.length) - 1] ?? answers[0];
        response.writeHead(answer?.status ?? 500, answer?.headers).end('{}');
      });
    });
    await new Promise<void>((resolve) => shop.listen(0, '127.0.0.1', resolve));
  });

  afterAll(async () => {
    await new Promise((resolve) => shop?.close(resolve));
    await client?.close();
  });

  it('sends the same signed bytes until the shop answers, honouring Retry-After, then once more', async () => {
    const event: PaymentSucceededEvent = {
      id: 'evt_retry',
      type: 'payment.succeeded',
      data: { chargeId: 'ch_1', checkoutKey: 'co_1', amountCents: 1250 },
    };
    const { port } = shop.address() as AddressInfo;
    await deliverWebhook(db, `http://127.0.0.1:${port}/api/webhooks/payments`, event);

    expect(received).toHaveLength(4);
    for (const { body, signature } of received) {
      expect(body).toBe(JSON.stringify(event));
      expect(verifyWebhook(body, signature ?? null, webhookSecret())).toBeNull();
    }
    // The 409 said "in a second": the provider waited at least that long.
    const [busy, retried] = received;
    expect((retried?.at ?? 0) - (busy?.at ?? 0)).toBeGreaterThanOrEqual(1_000);
    const logged = await db
      .select({ status: webhookDeliveries.status, replayed: webhookDeliveries.replayed })
      .from(webhookDeliveries)
      .orderBy(asc(webhookDeliveries.id));
    expect(logged).toEqual([
      { status: 409, replayed: false },
      { status: 503, replayed: false },
      { status: 200, replayed: false },
      { status: 200, replayed: true },
    ]);
  });
});
