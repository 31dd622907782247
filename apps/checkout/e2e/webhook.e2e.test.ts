import { randomUUID } from 'node:crypto';
import { createTRPCClient, httpLink } from '@trpc/client';
import superjson from 'superjson';
import { describe, expect, inject, it } from 'vitest';
import { PAYMENT_WEBHOOK_PATH } from '../src/server/payments/paymentEvents';
import { signWebhook, WEBHOOK_SIGNATURE_HEADER } from '../src/server/payments/webhookSignature';
import type { AppRouter } from '../src/server/routers/appRouter';
import { eventually } from './shopper';

const baseUrl = inject('baseUrl');
const webhookSecret = inject('webhookSecret');

/** The demo's API as one browser session, without a browser. */
function apiClient() {
  return createTRPCClient<AppRouter>({
    links: [
      httpLink({
        url: `${baseUrl}/api/trpc`,
        transformer: superjson,
        headers: { 'x-demo-session': `webhook-test-${randomUUID()}` },
      }),
    ],
  });
}

/** A fresh `payment.succeeded` event (new event and charge ids) for one checkout. */
function paymentSucceeded(checkoutKey: string, amountCents: number) {
  return {
    id: `evt_${randomUUID()}`,
    type: 'payment.succeeded',
    data: { chargeId: `ch_${randomUUID()}`, checkoutKey, amountCents },
  };
}

/**
 * POSTs a webhook body to the shop's receiver, signed as the provider signs it (or with
 * the signature header given, or none).
 */
async function deliver(body: string, signature: string | null = signWebhook(body, webhookSecret)) {
  const response = await fetch(`${baseUrl}${PAYMENT_WEBHOOK_PATH}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(signature === null ? {} : { [WEBHOOK_SIGNATURE_HEADER]: signature }),
    },
    body,
  });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

describe('the payment webhook receiver, over HTTP against the running app', () => {
  it('answers a redelivered event from the store: one confirmation, the same answer byte for byte', async () => {
    const api = apiClient();
    const checkoutKey = `co_${randomUUID()}`;
    const event = paymentSucceeded(checkoutKey, 3050);
    const first = await deliver(JSON.stringify(event));
    expect(first.status).toBe(200);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(JSON.parse(first.text)).toMatchObject({ received: event.id });

    // The same event again, its members in another order (a provider may re-serialize it).
    const { data, type, id } = event;
    const redelivery = await deliver(JSON.stringify({ data, type, id }));
    expect(redelivery.status).toBe(200);
    expect(redelivery.headers.get('idempotent-replayed')).toBe('true');
    expect(redelivery.text).toBe(first.text);
    expect((await api.demo.checkout.query({ key: checkoutKey })).webhooks).toMatchObject({
      confirmations: 1,
      events: 1,
    });

    // The same event id with another payload is refused, as problem+json linking its docs.
    const altered = await deliver(
      JSON.stringify({ ...event, data: { ...event.data, amountCents: 1 } }),
    );
    expect(altered.status).toBe(422);
    expect(altered.headers.get('content-type')).toBe('application/problem+json');
    expect(JSON.parse(altered.text)).toMatchObject({
      status: 422,
      code: 'KEY_MISMATCH',
      type: expect.stringMatching(/#key_mismatch$/),
    });
    // No event id: no key, a 400 problem, and nothing ran.
    const anonymous = await deliver(JSON.stringify({ type: 'payment.succeeded', data }));
    expect(anonymous.status).toBe(400);
    expect(JSON.parse(anonymous.text)).toMatchObject({ code: 'INVALID_KEY', reason: 'missing' });
    expect((await api.demo.checkout.query({ key: checkoutKey })).webhooks.confirmations).toBe(1);
  });

  it('an event its tables cannot hold (an amount past integer, U+0000 in an id) is a stored 400, not a 500 on every delivery', async () => {
    const api = apiClient();
    const checkoutKey = `co_${randomUUID()}`;
    const tooMuch = paymentSucceeded(checkoutKey, 2_147_483_648);
    const nul = paymentSucceeded(checkoutKey, 100);
    nul.data.chargeId = 'ch_\u0000x';
    for (const event of [tooMuch, nul]) {
      const first = await deliver(JSON.stringify(event));
      expect(first.status).toBe(400);
      expect(JSON.parse(first.text).error).toContain('printable ASCII');
      const again = await deliver(JSON.stringify(event));
      expect(again.status).toBe(400);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
    }
    expect((await api.demo.checkout.query({ key: checkoutKey })).webhooks.confirmations).toBe(0);
    // The panel's own query refuses such a key too, in words, without SQL.
    const refused = await api.demo.checkout
      .query({ key: 'co_\u0000x' })
      .catch((error: Error) => error);
    expect(refused).toBeInstanceOf(Error);
    expect((refused as Error).message).toContain('printable ASCII');
  });

  it('refuses unsigned, forged and stale deliveries with a 401 problem, and stores nothing under their event id', async () => {
    const api = apiClient();
    const checkoutKey = `co_${randomUUID()}`;
    const event = paymentSucceeded(checkoutKey, 100);
    const body = JSON.stringify(event);
    const nowSeconds = Math.floor(Date.now() / 1000);
    const attempts = [
      { signature: null, reason: 'missing' },
      { signature: 'sha256=deadbeef', reason: 'malformed' },
      { signature: signWebhook(body, 'a guessed secret'), reason: 'mismatch' },
      // Signed by the provider, for another body: the amount was changed on the way.
      {
        signature: signWebhook(body.replace('"amountCents":100', '"amountCents":1'), webhookSecret),
        reason: 'mismatch',
      },
      { signature: signWebhook(body, webhookSecret, nowSeconds - 3_600), reason: 'expired' },
    ];
    for (const { signature, reason } of attempts) {
      const refused = await deliver(body, signature);
      expect(refused.status).toBe(401);
      expect(refused.headers.get('content-type')).toBe('application/problem+json');
      expect(JSON.parse(refused.text)).toMatchObject({ status: 401, reason });
    }
    expect((await api.demo.checkout.query({ key: checkoutKey })).webhooks.confirmations).toBe(0);

    // The provider's own delivery of that event id is then handled as new, not replayed.
    const real = await deliver(body);
    expect(real.status).toBe(200);
    expect(real.headers.get('idempotent-replayed')).toBeNull();
    expect((await api.demo.checkout.query({ key: checkoutKey })).webhooks.confirmations).toBe(1);
  });

  it("a paid checkout's webhook is delivered twice by the provider and handled once", async () => {
    const api = apiClient();
    const checkout = await api.checkout.open.mutate({
      cartId: randomUUID(),
      items: [{ productId: 'sencha', quantity: 1 }],
    });
    await api.checkout.prepare.mutate({
      checkoutId: checkout.id,
      email: 'webhook@example.com',
      cardNumber: '4242 4242 4242 4242',
    });
    const paid = await api.checkout.pay.mutate({ checkoutId: checkout.id });
    expect(paid.totalCents).toBe(1250);

    const webhooks = await eventually('the provider to deliver its webhook twice', async () => {
      const found = (await api.demo.checkout.query({ key: checkout.id })).webhooks;
      return found.deliveries >= 2 ? found : undefined;
    });
    expect(webhooks).toEqual({ confirmations: 1, events: 1, deliveries: 2, replayed: 1 });
  });
});
