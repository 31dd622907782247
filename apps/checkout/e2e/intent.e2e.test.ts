import { describe, expect, inject, it } from 'vitest';
import {
  attemptOutcomes,
  checkoutKeyOf,
  eventually,
  expectExactlyOnce,
  type Shopper,
  screenshot,
  settledDatabase,
  shoppersIn,
  WAIT_MS,
  waitForAttempt,
  waitForCounts,
  waitForPaidOrder,
  waitForText,
} from './shopper';

/**
 * The checkout is an intent created on the server before Pay, and Pay is keyed by its id:
 * whatever a person does with reloads, Back, tabs and browsers, the cart is paid once.
 */
const baseUrl = inject('baseUrl');
const shopper = shoppersIn(baseUrl);

/** The key record of a checkout, once it satisfies `done`. */
function keyRecord(customer: Shopper, key: string, done: (record: KeyRecord) => boolean) {
  return eventually(
    `the key record of ${key}`,
    async () => {
      const { key: record, charges } = await customer.api.demo.checkout.query({ key });
      return record && done({ ...record, charges: charges.length }) ? record : undefined;
    },
    60_000,
  );
}

interface KeyRecord {
  status: string;
  attempts: number;
  charges: number;
}

/**
 * A new shopper who pays with this chaos (see payWith), and the checkout's key once its
 * key record satisfies `done`.
 */
async function payUntil(query: string, done: (record: KeyRecord) => boolean) {
  const customer = await shopper({ pay: query });
  const key = await checkoutKeyOf(customer.page);
  await keyRecord(customer, key, done);
  return { customer, page: customer.page, key };
}

/** Charged, then the server "died": the key is in progress, with no order behind it. */
const crashedAfterCharge = (record: KeyRecord) =>
  record.status === 'in_progress' && record.charges === 1;

describe('one payment per checkout, whatever the person does', () => {
  it('reload mid-payment under dropped replies: the reloaded page says "already paid"', async () => {
    // The server ran it; every reply is being dropped, and the tab is still retrying.
    const { customer, page, key } = await payUntil(
      '?drop=100',
      (record) => record.status === 'completed',
    );
    await page.reload();

    await page.getByTestId('already-paid').waitFor({ timeout: WAIT_MS });
    expect(await page.getByTestId('pay').count()).toBe(0);
    expect(await checkoutKeyOf(page)).toBe(key);
    // The tab's attempts survived the reload, with the chaos they were sent under.
    await page.getByTestId('what-happened').getByText('chaos: 100 % of replies dropped').waitFor();
    expect(await attemptOutcomes(page)).toContain('reply-lost');
    await page.getByTestId('already-paid').getByRole('link', { name: 'See the order' }).click();
    await waitForPaidOrder(page);
    await screenshot(page, 'h-reload-dropped-replies');

    expectExactlyOnce(await settledDatabase(customer.api, key));
    expect((await customer.api.demo.totals.query()).keysInProgress).toBe(0);
  });

  it('reload mid-payment under a crash after the charge: Pay again completes the same order', async () => {
    const { customer, page, key } = await payUntil('?crash=1', crashedAfterCharge);
    await page.reload();

    await page.getByTestId('payment-under-way').waitFor({ timeout: WAIT_MS });
    await page.getByTestId('what-happened').getByText('chaos: crash after charge').waitFor();
    await page.getByTestId('pay').click();
    await page.waitForURL(/\/orders\/[^?]+$/, { timeout: WAIT_MS });
    await waitForCounts(page, { charges: 1, orders: 1, emails: 1 });
    await waitForText(page, 'key-record', 'taken over 1×');
    await screenshot(page, 'i-reload-crash');

    const database = await settledDatabase(customer.api, key);
    expectExactlyOnce(database);
    // The takeover found the charge in its recovery point: the provider was asked once.
    expect(database.charged[0]?.requests).toBe(1);
    expect(database.key).toMatchObject({ attempts: 2, recoveryPoints: ['charge', 'order'] });
  });

  it('a crash after the charge, then nobody comes back: the server finishes the one order', async () => {
    const { customer, page, key } = await payUntil('?crash=1', crashedAfterCharge);
    await page.close();

    // Once the lease has passed and then ABANDONED_AFTER_MS more, the server takes over.
    await keyRecord(customer, key, (record) => record.status === 'completed');
    const database = await settledDatabase(customer.api, key);
    expectExactlyOnce(database);
    expect(database.charged[0]?.requests).toBe(1);
    expect(database.key).toMatchObject({ attempts: 2, recoveryPoints: ['charge', 'order'] });
  }, 120_000);

  it('Back mid-payment, then checkout and Pay again: the same checkout, one charge', async () => {
    const { customer, page, key } = await payUntil('?crash=1', crashedAfterCharge);
    await page.goBack();
    await page.waitForURL((url) => url.pathname === '/', { timeout: WAIT_MS });

    // The cart is still full: checking out again opens the same checkout.
    await page.getByRole('link', { name: 'Go to checkout' }).click();
    await page.waitForURL(/\/checkout/, { timeout: WAIT_MS });
    expect(await checkoutKeyOf(page)).toBe(key);
    await page.getByTestId('pay').click();
    await waitForPaidOrder(page);
    await screenshot(page, 'j-back-then-pay');

    const database = await settledDatabase(customer.api, key);
    expectExactlyOnce(database);
    expect(database.charged[0]?.requests).toBe(1);
  });

  it('two tabs paying one cart at once: one order, and the second tab lands on it', async () => {
    const customer = await shopper();
    const first = customer.page;
    const second = await customer.context.newPage();
    await Promise.all([first.goto('/checkout'), second.goto('/checkout')]);
    const key = await checkoutKeyOf(first);
    expect(await checkoutKeyOf(second)).toBe(key);

    // Both at the same instant (a click waits for the button to hold still, and the other
    // tab's payment soon changes the page).
    await Promise.all([
      first.getByTestId('pay').dispatchEvent('click'),
      second.getByTestId('pay').dispatchEvent('click'),
    ]);
    await Promise.all([
      first.waitForURL(/\/orders\//, { timeout: WAIT_MS }),
      second.waitForURL(/\/orders\//, { timeout: WAIT_MS }),
    ]);
    expect(new URL(second.url()).pathname).toBe(new URL(first.url()).pathname);
    await waitForCounts(first, { charges: 1, orders: 1, emails: 1 });
    await waitForCounts(second, { charges: 1, orders: 1, emails: 1 });
    // Exactly one tab ran the payment; the other got its stored answer.
    const already = [first.url(), second.url()].filter((url) => url.endsWith('?already=1'));
    expect(already).toHaveLength(1);
    await screenshot(first, 'k-two-tabs-first');
    await screenshot(second, 'k-two-tabs-second');
    await second.close();

    expectExactlyOnce(await settledDatabase(customer.api, key));
  });

  it('a cart emptied and filled again in another tab is one cart: its older checkout is not paid again', async () => {
    const customer = await shopper();
    const first = customer.page;
    await first.goto('/checkout');
    const key = await checkoutKeyOf(first);
    await first.reload(); // its link names the checkout now
    expect(await checkoutKeyOf(first)).toBe(key);
    // The second tab empties the cart, puts the same things back and pays.
    const second = await customer.context.newPage();
    await second.goto('/');
    for (const name of ['Sencha, 100 g', 'Stoneware mug']) {
      await second.getByRole('button', { name: `One less ${name}` }).click();
    }
    await second.getByTestId('cart-total').waitFor({ state: 'detached', timeout: WAIT_MS });
    for (const product of ['sencha', 'mug']) {
      await second
        .getByTestId(`product-${product}`)
        .getByRole('button', { name: 'Add to cart' })
        .click();
    }
    await second.getByTestId('cart-total').getByText('€30.50').waitFor({ timeout: WAIT_MS });
    await second.goto('/checkout');
    expect(await checkoutKeyOf(second)).toBe(key);
    await second.getByTestId('pay').click();
    await waitForPaidOrder(second);
    await second.close();

    // The first tab still shows that checkout: it is paid, and Pay charges nothing more.
    await first.getByTestId('already-paid').waitFor({ timeout: WAIT_MS });
    expect(await first.getByTestId('pay').count()).toBe(0);
    expectExactlyOnce(await settledDatabase(customer.api, key));
  });

  it('a second browser paying the same checkout by its link gets the one order', async () => {
    const owner = await shopper();
    await owner.page.goto('/checkout');
    const key = await checkoutKeyOf(owner.page);
    const link = await owner.page
      .getByTestId('checkout-link')
      .getByRole('link')
      .getAttribute('href');
    expect(link).toBe(`/checkout?checkout=${key}`);
    if (!link) throw new Error('the checkout page shows no link');

    // Another browser: its own session and cart (a jar of honey), and the link.
    const other = await shopper({ fill: false });
    await other.page
      .getByTestId('product-honey')
      .getByRole('button', { name: 'Add to cart' })
      .click();
    await other.page.goto(link);
    await waitForText(other.page, 'cart-total', '€30.50');

    await Promise.all([
      owner.page.getByTestId('pay').dispatchEvent('click'),
      other.page.getByTestId('pay').dispatchEvent('click'),
    ]);
    await Promise.all([
      owner.page.waitForURL(/\/orders\//, { timeout: WAIT_MS }),
      other.page.waitForURL(/\/orders\//, { timeout: WAIT_MS }),
    ]);
    expect(new URL(other.page.url()).pathname).toBe(new URL(owner.page.url()).pathname);
    // The order page in the other browser shows the order and its tiles, not zeros.
    await other.page.getByTestId('confirmation').getByText('Total charged').waitFor();
    await waitForCounts(other.page, { charges: 1, orders: 1, emails: 1 });
    await screenshot(other.page, 'l-second-browser');
    // Paying someone else's checkout left this browser's own cart alone.
    await other.page.getByRole('link', { name: 'Checkout (1)' }).waitFor();

    expectExactlyOnce(await settledDatabase(owner.api, key));
  });

  it('Pay again after "outcome unknown" finds out: the stored payment, not a second one', async () => {
    const customer = await shopper({ pay: '?drop=100' });
    const { page } = customer;
    const key = await checkoutKeyOf(page);
    // Every reply is lost until the retries give up (about ten attempts).
    const notice = page.locator('[data-testid=pay-error][data-outcome=unknown]');
    await notice.waitFor({ timeout: 90_000 });
    expect(await notice.textContent()).toMatch(/^Outcome unknown\. No answer came back/);
    expect(await notice.textContent()).toContain('Pay again finds out');
    // It was in fact paid, and the page does not claim otherwise.
    await waitForCounts(page, { charges: 1, orders: 1, emails: 1 });
    await screenshot(page, 'm-outcome-unknown');

    // Another tab adds to the cart meanwhile: this page stays on the payment it may have made.
    const other = await customer.context.newPage();
    await other.goto('/');
    await other.getByTestId('product-honey').getByRole('button', { name: 'Add to cart' }).click();
    await other.close();
    // This tab hears of it (the cart's count: honey alone once the paid lines settled).
    await page.getByRole('link', { name: /^Checkout \((1|3)\)$/ }).waitFor({ timeout: WAIT_MS });
    expect(await checkoutKeyOf(page)).toBe(key);

    // The network is back; Pay again.
    await page.locator('input[type=range]').first().fill('0');
    await page.getByTestId('pay').click();
    await page.waitForURL(/\/orders\//, { timeout: WAIT_MS });
    await waitForAttempt(page, 'replayed');
    expect((await attemptOutcomes(page)).at(-1)).toBe('replayed');
    await waitForCounts(page, { charges: 1, orders: 1, emails: 1 });

    const database = await settledDatabase(customer.api, key);
    expectExactlyOnce(database);
    expect(page.url()).toContain(`/orders/${database.orders[0]?.id}`);
  }, 150_000);

  it('added latency: each attempt shows when it left the browser', async () => {
    const { page } = await shopper({ pay: '?latency=1500' });
    await page.waitForURL(/\/orders\//, { timeout: WAIT_MS });
    const sent = await page.locator('[data-testid=attempt] td.when').first().textContent();
    expect(Number((sent ?? '').replace(/[^0-9]/g, ''))).toBeGreaterThanOrEqual(1500);
  });
});
