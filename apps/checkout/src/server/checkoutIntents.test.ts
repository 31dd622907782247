import { randomUUID } from 'node:crypto';
import { PGlite } from '@electric-sql/pglite';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { drizzle as drizzlePostgres } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CartPaidElsewhereError,
  findCheckout,
  findCheckoutView,
  markCheckout,
  notePayKeyScope,
  openCheckout,
  type PaymentDetails,
  payGate,
  prepareCheckout,
  startPayment,
} from './checkoutIntents';
import { migrateApp } from './db/migrateApp';
import type { AppDatabase } from './db/openDatabase';
import type { OrderLine } from './db/schema';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const quiet = { onnotice: () => {} };

/** PGlite in memory, or a scratch database of its own on the real Postgres, dropped after. */
const backends = {
  async PGlite() {
    const client = new PGlite();
    return { db: drizzlePglite(client) as unknown as AppDatabase, close: () => client.close() };
  },
  async Postgres() {
    const name = `idem_checkout_${randomUUID().replaceAll('-', '').slice(0, 16)}`;
    const admin = postgres(DATABASE_URL, { ...quiet, max: 1 });
    await admin.unsafe(`create database "${name}"`);
    const url = new URL(DATABASE_URL);
    url.pathname = `/${name}`;
    const client = postgres(url.toString(), { ...quiet, max: 10 });
    return {
      db: drizzlePostgres(client) as unknown as AppDatabase,
      async close() {
        await client.end({ timeout: 5 });
        await admin.unsafe(`drop database if exists "${name}" with (force)`);
        await admin.end();
      },
    };
  },
};

const tea: OrderLine = { productId: 'sencha', name: 'Sencha', quantity: 1, priceCents: 1250 };
const mug: OrderLine = { productId: 'mug', name: 'Mug', quantity: 2, priceCents: 1800 };
const ada: PaymentDetails = {
  email: 'ada@example.com',
  cardNumber: '4242 4242 4242 4242',
  simulate: { crashAfterCharge: false, redeliverEvent: false },
};
const cart = (lines: OrderLine[], cartId = 'cart-0001') => ({
  sessionId: 'session-1',
  cartId,
  lines,
  totalCents: lines.reduce((sum, line) => sum + line.priceCents * line.quantity, 0),
});

for (const [name, open] of Object.entries(backends)) {
  describe(`checkout intents on ${name}`, () => {
    let db: AppDatabase;
    let close: () => Promise<void>;
    beforeAll(async () => {
      ({ db, close } = await open());
      await migrateApp(db);
    });
    afterAll(async () => {
      await close?.();
    });

    it('one checkout per cart version, however many tabs open it at once', async () => {
      const opened = await Promise.all(
        Array.from({ length: 25 }, (_, index) =>
          openCheckout(db, cart(index % 2 ? [tea, mug] : [mug, tea], 'cart-many')),
        ),
      );
      expect(new Set(opened.map((row) => row.id)).size).toBe(1);
      expect(opened[0]).toMatchObject({ status: 'open', totalCents: 4850 });

      const changed = await openCheckout(db, cart([tea], 'cart-many'));
      expect(changed.id).not.toBe(opened[0]?.id);
      const otherCart = await openCheckout(db, cart([tea, mug], 'cart-other'));
      expect(otherCart.id).not.toBe(opened[0]?.id);
    });

    it('the details freeze once a payment starts, and a paid checkout stays the cart’s', async () => {
      const checkout = await openCheckout(db, cart([tea], 'cart-freeze'));
      expect(await prepareCheckout(db, checkout.id, ada)).toMatchObject({
        email: 'ada@example.com',
      });
      const paying = await startPayment(db, checkout.id);
      expect(paying?.status).toBe('paying');
      // A second payer's details (another tab, another browser) change nothing now.
      const late = await prepareCheckout(db, checkout.id, { ...ada, email: 'bob@example.com' });
      expect(late).toMatchObject({ id: checkout.id, status: 'paying', email: 'ada@example.com' });
      expect((await startPayment(db, checkout.id))?.status).toBe('paying');

      await markCheckout(db, checkout.id, { status: 'paid', orderId: 'order-1' });
      // Reopening the same cart (a reload, Back) finds the paid checkout, not a new one.
      expect(await openCheckout(db, cart([tea], 'cart-freeze'))).toMatchObject({
        id: checkout.id,
        status: 'paid',
        orderId: 'order-1',
      });
    });

    it('Pay before the details starts nothing: the checkout stays open for them, its cart free', async () => {
      const checkout = await openCheckout(db, cart([tea], 'cart-early-pay'));
      expect((await startPayment(db, checkout.id))?.status).toBe('open');
      expect(await prepareCheckout(db, checkout.id, ada)).toMatchObject({
        status: 'open',
        email: 'ada@example.com',
      });
      expect((await startPayment(db, checkout.id))?.status).toBe('paying');
    });

    it('after a decline the same card keeps the checkout, another card gets one new one', async () => {
      const declined = await openCheckout(db, cart([mug], 'cart-decline'));
      await prepareCheckout(db, declined.id, ada);
      await startPayment(db, declined.id);
      await markCheckout(db, declined.id, { status: 'declined' });

      expect((await prepareCheckout(db, declined.id, ada))?.id).toBe(declined.id);
      const otherCard = { ...ada, cardNumber: '5555 5555 5555 4444' };
      const next = await Promise.all(
        Array.from({ length: 10 }, () => prepareCheckout(db, declined.id, otherCard)),
      );
      expect(new Set(next.map((row) => row?.id)).size).toBe(1);
      expect(next[0]).toMatchObject({ status: 'open', cardNumber: '5555 5555 5555 4444' });
      expect(next[0]?.id).not.toBe(declined.id);
      expect((await findCheckout(db, declined.id))?.status).toBe('declined');
    });

    it('a cart is paid once: its other checkouts wait while one is paid, and never pay after', async () => {
      // An older cart version (Back) and the current one, both open.
      const older = await openCheckout(db, cart([mug], 'cart-once'));
      const current = await openCheckout(db, cart([mug, tea], 'cart-once'));
      for (const { id } of [older, current]) await prepareCheckout(db, id, ada);
      const both = await Promise.allSettled([
        startPayment(db, older.id),
        startPayment(db, current.id),
      ]);
      const started = both.filter((result) => result.status === 'fulfilled');
      expect(started).toHaveLength(1);
      const winner = started[0]?.value;
      if (!winner) throw new Error('no checkout started its payment');
      const loser = winner.id === older.id ? current : older;
      const refusal = (both.find((result) => result.status === 'rejected') as PromiseRejectedResult)
        .reason;
      expect(refusal).toBeInstanceOf(CartPaidElsewhereError);
      expect(refusal).toMatchObject({ checkoutId: winner.id, status: 'paying' });
      expect((await findCheckout(db, loser.id))?.status).toBe('open');
      expect((await findCheckoutView(db, loser.id))?.otherPayment).toMatchObject({
        checkoutId: winner.id,
        status: 'paying',
      });

      await markCheckout(db, winner.id, { status: 'paid', orderId: 'order-once' });
      await expect(startPayment(db, loser.id)).rejects.toMatchObject({ status: 'paid' });
      // A retry of the paid one's own payment still finds it (a replay, a takeover).
      expect((await startPayment(db, winner.id))?.status).toBe('paid');
    });

    it('a declined checkout leaves the cart to be paid through another', async () => {
      const first = await openCheckout(db, cart([tea], 'cart-after-decline'));
      const second = await openCheckout(db, cart([tea, mug], 'cart-after-decline'));
      for (const { id } of [first, second]) await prepareCheckout(db, id, ada);
      await startPayment(db, first.id);
      await markCheckout(db, first.id, { status: 'declined' });
      expect((await startPayment(db, second.id))?.status).toBe('paying');
      expect((await findCheckoutView(db, second.id))?.otherPayment).toBeNull();
    });

    it('a checkout belongs to the session that opened it, and keeps its first Pay key scope', async () => {
      const checkout = await openCheckout(db, cart([mug], 'cart-owner'));
      expect((await payGate(db, checkout.id))?.owner).toBe('session-1');
      expect(checkout.payKeyScope).toBeNull();
      await notePayKeyScope(db, checkout.id, 'session:session-1/checkout.pay');
      await notePayKeyScope(db, checkout.id, 'another/checkout.pay');
      expect((await findCheckout(db, checkout.id))?.payKeyScope).toBe(
        'session:session-1/checkout.pay',
      );
    });

    it('an unknown checkout is undefined, not an error', async () => {
      expect(await prepareCheckout(db, `co_${randomUUID()}`, ada)).toBeUndefined();
      expect(await startPayment(db, `co_${randomUUID()}`)).toBeUndefined();
      expect(await payGate(db, `co_${randomUUID()}`)).toBeUndefined();
    });
  });
}
