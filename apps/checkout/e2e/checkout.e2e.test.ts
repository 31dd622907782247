import { describe, expect, inject, it } from 'vitest';
import {
  attemptOutcomes,
  checkoutKeyOf,
  type Shopper,
  screenshot,
  shoppersIn,
  waitForAttempt,
  waitForCounts,
  waitForPaidOrder,
  waitForText,
} from './shopper';

const baseUrl = inject('baseUrl');
const shopper = shoppersIn(baseUrl);

/** What the database holds for the checkout on screen. */
async function databaseFor({ page, api }: Shopper) {
  const checkout = await api.demo.checkout.query({ key: await checkoutKeyOf(page) });
  return {
    ...checkout,
    charged: checkout.charges.filter((charge) => charge.outcome === 'charged'),
    declined: checkout.charges.filter((charge) => charge.outcome === 'declined'),
  };
}

/**
 * One charge, for which the provider was asked once, one order and one email in the
 * database for the checkout on screen; what it holds, for more checks.
 */
async function expectChargedOnce(customer: Shopper) {
  const database = await databaseFor(customer);
  expect(database.charged).toHaveLength(1);
  expect(database.charged[0]?.requests).toBe(1);
  expect(database.orders).toHaveLength(1);
  expect(database.emails).toHaveLength(1);
  return database;
}

/** A new shopper who pays with this chaos (see payWith), once the order page shows one of each. */
async function paidWith(query: string) {
  const customer = await shopper({ pay: query });
  await waitForPaidOrder(customer.page);
  return { customer, page: customer.page };
}

describe('checkout in a real browser', () => {
  it('(a) happy path: one attempt, one charge, one order, one email', async () => {
    const { customer, page } = await paidWith('');
    await waitForText(page, 'confirmation', 'is paid');
    await screenshot(page, 'a-happy-path');

    expect(await attemptOutcomes(page)).toEqual(['executed']);
    const database = await databaseFor(customer);
    expect(database.charged).toHaveLength(1);
    expect(database.charged[0]?.amountCents).toBe(3050);
    expect(database.orders).toHaveLength(1);
    expect(database.emails).toHaveLength(1);
    expect(database.key).toMatchObject({ status: 'completed', attempts: 1 });
  });

  it('(b) 50 % dropped replies: retries replay the one execution', async () => {
    // Seed 4 drops the first two replies: the third attempt gets the stored answer.
    const { customer, page } = await paidWith('?drop=50&seed=4');
    await waitForAttempt(page, 'replayed');
    await screenshot(page, 'b-dropped-replies');

    const outcomes = await attemptOutcomes(page);
    expect(outcomes).toEqual(['reply-lost', 'reply-lost', 'replayed']);
    expect(
      await page
        .getByTestId('attempts')
        .getByText(/retrying in \d+ ms/)
        .count(),
    ).toBe(2);
    await expectChargedOnce(customer);
  });

  it('(c) double click: two requests with one key, one charge', async () => {
    const { customer, page } = await paidWith('?double=1');
    // The second request meets the first one's lease (409), then replays its answer.
    await waitForAttempt(page, 'replayed');
    await screenshot(page, 'c-double-click');
    // Both requests ended before the page moved on: nothing left "sending…" and no row
    // announcing a retry that never came, each request's attempts under its own heading.
    expect(await page.locator('[data-testid=attempt][data-outcome=pending]').count()).toBe(0);
    for (const call of ['1', '2']) {
      const last = page.locator(`[data-testid=attempt][data-call="${call}"]`).last();
      expect(await last.locator('td.retry').textContent()).toBe('');
    }

    const outcomes = await attemptOutcomes(page);
    expect(outcomes.filter((outcome) => outcome === 'executed')).toHaveLength(1);
    expect(outcomes.length).toBeGreaterThanOrEqual(2);
    await expectChargedOnce(customer);
  });

  it('(d) declined card: the decline is stored and replayed, nothing is charged', async () => {
    const customer = await shopper({ pay: '', cardNumber: '4000 0000 0000 0002' });
    const { page } = customer;
    await waitForText(page, 'pay-error', 'Declined.');
    expect(await attemptOutcomes(page)).toEqual(['error']);

    // Pay again with the same request: same key, the stored decline comes back.
    await page.getByTestId('pay').click();
    await waitForAttempt(page, 'replayed-error');
    await waitForText(page, 'pay-error', 'Declined.');
    await waitForCounts(page, { charges: 0, orders: 0, emails: 0 });
    await waitForText(page, 'count-charges', 'declined: nothing charged');
    await waitForText(page, 'key-record', 'completed');
    await screenshot(page, 'd-declined-card');

    expect(await attemptOutcomes(page)).toEqual(['error', 'replayed-error']);
    const database = await databaseFor(customer);
    expect(database.charged).toHaveLength(0);
    expect(database.declined).toHaveLength(1);
    // The replay never reached the provider: it was asked once.
    expect(database.declined[0]?.requests).toBe(1);
    expect(database.orders).toHaveLength(0);
    expect(database.key).toMatchObject({ status: 'completed', attempts: 1 });
  });

  it('(e) crash after charge: 409 while the lease lives, then a takeover without a second charge', async () => {
    const { customer, page } = await paidWith('?crash=1');
    await waitForText(page, 'key-record', 'taken over 1×');
    await screenshot(page, 'e-crash-after-charge');

    const outcomes = await attemptOutcomes(page);
    expect(outcomes[0]).toBe('connection-lost');
    expect(outcomes).toContain('in-progress');
    expect(outcomes.at(-1)).toBe('executed');
    // The takeover found the charge in its recovery point: the provider was asked once.
    const database = await expectChargedOnce(customer);
    expect(database.key).toMatchObject({
      status: 'completed',
      attempts: 2,
      recoveryPoints: ['charge', 'order'],
    });
  });

  it('(f) redelivered event: the inbox skips the copy, one email', async () => {
    const { customer, page } = await paidWith('?redeliver=1');
    await waitForText(page, 'count-emails', '1 duplicate skipped by the inbox');
    await screenshot(page, 'f-redelivered-event');

    const database = await databaseFor(customer);
    expect(database.emails).toHaveLength(1);
    expect(database.deliveries).toEqual({ processed: 1, duplicate: 1 });
  });
});
