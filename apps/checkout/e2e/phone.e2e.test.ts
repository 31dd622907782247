import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  launchChromium,
  newShopper,
  PHONE,
  payWith,
  type Shopper,
  screenshot,
  WAIT_MS,
  waitForCounts,
} from './shopper';

/** Every page at a phone's 390 px: nothing sticks out, nothing scrolls sideways. */
const baseUrl = inject('baseUrl');
let close: (() => Promise<void>) | undefined;
let customer: Shopper;

beforeAll(async () => {
  const browser = await launchChromium();
  close = () => browser.close();
  customer = await newShopper(browser, baseUrl, { viewport: PHONE });
});

afterAll(async () => {
  await close?.();
});

async function fitsThePhone(page: Page, name: string) {
  const { scrollWidth, innerWidth } = await page.evaluate(() => ({
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
  }));
  await screenshot(page, `phone-${name}`);
  expect(innerWidth).toBe(PHONE.width);
  expect(scrollWidth, `${name}: ${scrollWidth} px wide`).toBeLessThanOrEqual(innerWidth);
}

describe('at 390 px', () => {
  it('the products page fits', async () => {
    await customer.page.goto('/');
    await customer.page.getByTestId('cart-total').waitFor({ timeout: WAIT_MS });
    await fitsThePhone(customer.page, 'products');
  });

  it('the checkout page fits, with every chaos switch on and a retry history', async () => {
    const { page } = customer;
    // Long values everywhere: a double click, lost replies, latency, a crash.
    await page.goto('/checkout?drop=50&latency=300&double=1&crash=1&redeliver=1&seed=7');
    await page.getByTestId('checkout-link').waitFor({ timeout: WAIT_MS });
    await fitsThePhone(page, 'checkout');
    await page.getByTestId('pay').click();
    await page.waitForURL(/\/orders\//, { timeout: 60_000 });
    await waitForCounts(page, { charges: 1, orders: 1, emails: 1 });
    await page.getByTestId('key-record').getByText('completed').waitFor({ timeout: WAIT_MS });
    await fitsThePhone(page, 'order');
  }, 120_000);

  it('the checkout page fits with a decline and an unknown order', async () => {
    const { page } = customer;
    await page.goto('/');
    await page.getByTestId('product-honey').getByRole('button', { name: 'Add to cart' }).click();
    await payWith(page, '', '4000 0000 0000 0002', '€9.50');
    await page.getByTestId('pay-error').getByText('Declined.').waitFor({ timeout: WAIT_MS });
    await fitsThePhone(page, 'declined');
    await page.goto('/orders/00000000-0000-4000-8000-000000000000');
    await page.getByTestId('no-order').waitFor({ timeout: WAIT_MS });
    await fitsThePhone(page, 'no-order');
    await page.goto('/orders/not-a-uuid');
    await page
      .getByTestId('no-order')
      .getByText('An order id looks like')
      .waitFor({ timeout: WAIT_MS });
  });
});
