import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { useTestApp } from './fixtures/testApp.js';
import { backends, rows } from './harness.js';
import { idempotencyData, mutate } from './httpClient.js';

for (const backend of backends) {
  describe(`idempotent({ key }): server-derived keys over HTTP on ${backend}`, () => {
    const app = useTestApp(backend);

    const stored = async (key: string) =>
      rows<{ scope: string; status: string }>(
        app().db,
        sql`select scope, status from idem_keys where key = ${key}`,
      );
    /** A call of the derivedCheckout procedure, whose key() is the input's checkoutId. */
    const checkout = (input: unknown, headers: Record<string, string>) =>
      mutate(app().url, 'derivedCheckout', input, headers);

    it('one execution per derived key, whatever key each request sends (the header is ignored)', async () => {
      const checkoutId = `checkout-${randomUUID()}`;
      const tag = randomUUID();
      const input = { checkoutId, tag, cents: 500 };
      const noHeader = await checkout(input, { 'x-user': 'ann' });
      // What idempotencyLink sends: a fresh key per call. A reload, a second tab.
      const otherKey = await checkout(input, { 'x-user': 'ann', 'Idempotency-Key': randomUUID() });
      const again = await checkout(input, { 'x-user': 'ann', 'Idempotency-Key': randomUUID() });
      expect(noHeader.status).toBe(200);
      expect(noHeader.data).toEqual({ execution: 1, key: checkoutId, cents: 500 });
      expect(otherKey.text).toBe(noHeader.text);
      expect(again.text).toBe(noHeader.text);
      expect(otherKey.headers.get('idempotent-replayed')).toBe('true');
      expect(app().executionsOf(tag)).toBe(1);
      expect(await stored(checkoutId)).toEqual([
        { scope: 'user:ann/derivedCheckout', status: 'completed' },
      ]);
    });

    it('a derived key keeps the scope and the fingerprint: another user runs, another input is a 422', async () => {
      const checkoutId = `checkout-${randomUUID()}`;
      const tag = randomUUID();
      const ann = await checkout({ checkoutId, tag, cents: 500 }, { 'x-user': 'ann' });
      const bob = await checkout({ checkoutId, tag, cents: 500 }, { 'x-user': 'bob' });
      expect(ann.status).toBe(200);
      expect(bob.status).toBe(200);
      expect(app().executionsOf(tag)).toBe(2);

      const changed = await checkout({ checkoutId, tag, cents: 900 }, { 'x-user': 'ann' });
      expect(changed.status).toBe(422);
      expect(changed.error?.data.idempotency?.code).toBe('KEY_MISMATCH');
      expect(app().executionsOf(tag)).toBe(2);
    });

    it.each([
      { what: 'an empty key', checkoutId: '', reason: 'empty' },
      { what: 'a 256-character key', checkoutId: 'c'.repeat(256), reason: 'too_long' },
      { what: 'a CRLF', checkoutId: 'c-1\r\nSet-Cookie: x=1', reason: 'invalid_character' },
      { what: 'a number, not a string', checkoutId: 42, reason: 'missing' },
    ])(
      'a derived key that is $what is a 400 INVALID_KEY naming key(); nothing runs or is stored',
      async ({ checkoutId, reason }) => {
        const tag = randomUUID();
        const header = randomUUID();
        const response = await checkout(
          { checkoutId, tag, cents: 1 },
          { 'x-user': 'ann', 'Idempotency-Key': header },
        );
        expect(response.status).toBe(400);
        expect(response.error?.data.idempotency).toEqual(
          idempotencyData('INVALID_KEY', { reason }),
        );
        expect(response.error?.message).toContain(
          'The key that key() derived for "derivedCheckout"',
        );
        expect(response.error?.message).toContain('1–255 printable ASCII');
        expect(response.headers.get('set-cookie')).toBeNull();
        expect(app().executionsOf(tag)).toBe(0);
        expect(await stored(header)).toEqual([]);
      },
    );

    it('before .input(), key() sees the raw input; returning undefined falls back to the request key', async () => {
      const eventId = `evt_${randomUUID()}`;
      const tag = randomUUID();
      const first = await mutate(app().url, 'derivedWebhook', { eventId, tag });
      const redelivered = await mutate(app().url, 'derivedWebhook', { eventId, tag });
      expect(first.data).toEqual({ execution: 1, key: eventId });
      expect(redelivered.headers.get('idempotent-replayed')).toBe('true');
      expect(app().executionsOf(tag)).toBe(1);
      expect(await stored(eventId)).toEqual([
        { scope: 'provider:acme/derivedWebhook', status: 'completed' },
      ]);

      const otherTag = randomUUID();
      const missing = await mutate(app().url, 'derivedWebhook', { tag: otherTag });
      expect(missing.status).toBe(400);
      expect(missing.error?.data.idempotency).toEqual(
        idempotencyData('INVALID_KEY', { reason: 'missing' }),
      );
      const header = randomUUID();
      const keyed = await mutate(
        app().url,
        'derivedWebhook',
        { tag: otherTag },
        { 'Idempotency-Key': header },
      );
      expect(keyed.data).toEqual({ execution: 1, key: header });
      expect(app().executionsOf(otherTag)).toBe(1);
    });

    it('transaction mode: the derived key claims and completes inside the transaction', async () => {
      const checkoutId = `checkout-${randomUUID()}`;
      const tag = randomUUID();
      const input = { checkoutId, tag, sku: 'tea' };
      const first = await mutate(app().url, 'txDerived', input, {
        'x-user': 'ann',
        'Idempotency-Key': randomUUID(),
      });
      const second = await mutate(app().url, 'txDerived', input, { 'x-user': 'ann' });
      expect(first.status).toBe(200);
      expect(second.text).toBe(first.text);
      expect(second.headers.get('idempotent-replayed')).toBe('true');
      expect(app().executionsOf(tag)).toBe(1);
      const orders = await rows<{ n: number }>(
        app().db,
        sql`select count(*)::int as n from orders where tag = ${tag}`,
      );
      expect(orders[0]?.n).toBe(1);
      expect(await stored(checkoutId)).toEqual([
        { scope: 'user:ann/txDerived', status: 'completed' },
      ]);
    });
  });
}
