import type { Page } from 'playwright-core';
import { describe, expect, inject, it } from 'vitest';
import { checkoutKeyOf, screenshot, shoppersIn, WAIT_MS } from './shopper';

/**
 * The cart as a person uses it: it changes while a checkout is open, it has limits, and
 * the answers to wrong input and wrong links are sentences, not JSON.
 */
const baseUrl = inject('baseUrl');
const shopper = shoppersIn(baseUrl);

/** Opens the checkout of the default cart (sencha + mug, €30.50); returns its key. */
async function atCheckout(page: Page): Promise<string> {
  await page.goto('/checkout');
  await page.getByTestId('cart-total').getByText('€30.50').waitFor({ timeout: WAIT_MS });
  return checkoutKeyOf(page);
}

/** The cart as this browser stores it. */
async function cartOf(page: Page) {
  return page.evaluate(() => JSON.parse(localStorage.getItem('idem-demo-cart') ?? '[]'));
}

describe('the cart', () => {
  it('paying an older checkout (Back) keeps what was added since: it is not charged, nor lost', async () => {
    const customer = await shopper(); // sencha + mug: €30.50
    const { page } = customer;
    const older = await atCheckout(page);

    await page.getByRole('link', { name: 'Products' }).click();
    await page.waitForURL((url) => url.pathname === '/', { timeout: WAIT_MS });
    await page.getByTestId('product-honey').getByRole('button', { name: 'Add to cart' }).click();
    await page.getByTestId('cart-total').getByText('€40.00').waitFor({ timeout: WAIT_MS });
    await page.goBack();
    await page.waitForURL(new RegExp(older), { timeout: WAIT_MS });

    // The page says the cart moved on, and Pay pays what it lists.
    await page.getByTestId('cart-changed').waitFor({ timeout: WAIT_MS });
    await page.getByTestId('cart-total').getByText('€30.50').waitFor({ timeout: WAIT_MS });
    await screenshot(page, 'cart-changed');
    await page.getByTestId('pay').click();
    await page.waitForURL(/\/orders\//, { timeout: WAIT_MS });

    const { charges } = await customer.api.demo.checkout.query({ key: older });
    expect(charges.filter((charge) => charge.outcome === 'charged')).toHaveLength(1);
    expect(await cartOf(page)).toEqual([{ productId: 'honey', quantity: 1 }]);

    // What is left is a new cart: its checkout is a new one, for the honey alone.
    await page.goto('/checkout');
    await page.getByTestId('cart-total').getByText('€9.50').waitFor({ timeout: WAIT_MS });
    expect(await checkoutKeyOf(page)).not.toBe(older);
    expect(await page.getByTestId('cart-changed').count()).toBe(0);
  });

  it('a cart is paid once: after its older checkout was paid, the newer one cannot charge the same items', async () => {
    const customer = await shopper(); // sencha + mug
    const { page } = customer;
    const older = await atCheckout(page);
    await page.getByRole('link', { name: 'Products' }).click();
    await page.getByTestId('product-honey').getByRole('button', { name: 'Add to cart' }).click();
    await page.getByRole('link', { name: /^Checkout \(/ }).click();
    await page.getByTestId('cart-total').getByText('€40.00').waitFor({ timeout: WAIT_MS });
    const newer = await checkoutKeyOf(page);
    expect(newer).not.toBe(older);

    // Pay the older one (its link, as Back would show it), then go back to the newer one.
    await page.goto(`/checkout?checkout=${older}`);
    await page.getByTestId('cart-changed').waitFor({ timeout: WAIT_MS });
    await page.getByTestId('pay').click();
    await page.waitForURL(/\/orders\//, { timeout: WAIT_MS });
    await page.goto(`/checkout?checkout=${newer}`);
    await page.getByTestId('paid-elsewhere').waitFor({ timeout: WAIT_MS });
    expect(await page.getByTestId('pay').count()).toBe(0);

    // Paying it anyway (a stale tab, a script) is refused, and nothing is charged.
    await expect(customer.api.checkout.pay.mutate({ checkoutId: newer })).rejects.toThrow(
      /already paid with another checkout/,
    );
    const { charges } = await customer.api.demo.checkout.query({ key: newer });
    expect(charges).toHaveLength(0);
  });

  it('Pay before the card details is refused and released: the panel says the key is free, and the checkout still pays', async () => {
    const { api } = await shopper({ fill: false });
    const checkout = await api.checkout.open.mutate({
      cartId: `cart-early-${Date.now()}`,
      items: [{ productId: 'mug', quantity: 1 }],
    });
    await expect(api.checkout.pay.mutate({ checkoutId: checkout.id })).rejects.toThrow(
      /Set the email and card first/,
    );
    expect((await api.demo.checkout.query({ key: checkout.id })).key).toMatchObject({
      status: 'in_progress',
      leaseEnded: true,
    });
    await api.checkout.prepare.mutate({
      checkoutId: checkout.id,
      email: 'ada@example.com',
      cardNumber: '4242 4242 4242 4242',
      simulate: { crashAfterCharge: false, redeliverEvent: false },
    });
    const paid = await api.checkout.pay.mutate({ checkoutId: checkout.id });
    expect(paid.checkoutKey).toBe(checkout.id);
    const { charges, key } = await api.demo.checkout.query({ key: checkout.id });
    expect(charges).toHaveLength(1);
    expect(key).toMatchObject({ status: 'completed', leaseEnded: false, attempts: 2 });
  });

  it('the header’s Checkout leaves a linked checkout for the cart’s own', async () => {
    const { page } = await shopper();
    await page.goto('/checkout?checkout=co_00000000-0000-4000-8000-000000000000');
    await page.getByText(/No checkout co_0{8}/).waitFor({ timeout: WAIT_MS });
    await page.getByRole('link', { name: /^Checkout \(/ }).click();
    await page.getByTestId('cart-total').getByText('€30.50').waitFor({ timeout: WAIT_MS });
    expect(await checkoutKeyOf(page)).toMatch(/^co_[0-9a-f]{8}-(?!0000)/);
  });

  it('a stored cart the shop cannot sell is mended: one line per product, within the limit, known products only', async () => {
    const { page } = await shopper({ fill: false });
    await page.evaluate(() =>
      localStorage.setItem(
        'idem-demo-cart',
        JSON.stringify([
          { productId: 'mug', quantity: 20 },
          { productId: 'mug', quantity: 20 },
          { productId: 'gone', quantity: 1 },
          { productId: 'honey', quantity: -3 },
        ]),
      ),
    );
    await page.goto('/checkout');
    await page.getByTestId('cart-total').getByText('€360.00').waitFor({ timeout: WAIT_MS });
    await page.getByRole('link', { name: 'Checkout (20)' }).waitFor({ timeout: WAIT_MS });
    expect(await cartOf(page)).toEqual([{ productId: 'mug', quantity: 20 }]);
  });

  it('stops at 20 of one product, and that checkout opens', async () => {
    const { page } = await shopper({ fill: false });
    const add = page.getByTestId('product-mug').getByRole('button', { name: 'Add to cart' });
    await add.click();
    const more = page.getByRole('button', { name: 'One more Stoneware mug' });
    await more.waitFor({ timeout: WAIT_MS });
    for (let count = 1; count < 20; count++) await more.click();
    await page.getByTestId('quantity-limit').waitFor({ timeout: WAIT_MS });
    expect(await more.isDisabled()).toBe(true);
    expect(await add.isDisabled()).toBe(true);
    expect(await cartOf(page)).toEqual([{ productId: 'mug', quantity: 20 }]);

    await page.goto('/checkout');
    await page.getByTestId('cart-total').getByText('€360.00').waitFor({ timeout: WAIT_MS });
    await checkoutKeyOf(page);
  });

  it('answers a refused email or card number with the rule, not JSON, and charges nothing', async () => {
    const customer = await shopper();
    const { page } = customer;
    const key = await atCheckout(page);

    await page.locator('input[name=email]').fill('<b>שלום</b> 🙂');
    await page.locator('input[name=email]').press('Enter'); // Enter pays, as the button does
    const error = page.getByTestId('pay-error');
    await error.getByText('Enter an email address for the receipt.').waitFor({ timeout: WAIT_MS });
    expect(await error.textContent()).not.toContain('"code"');

    await page.locator('input[name=email]').fill('ada@example.com');
    await page.locator('input[name=cardNumber]').fill('            ');
    await page.getByTestId('pay').click();
    await error.getByText(/12 to 19 digits/).waitFor({ timeout: WAIT_MS });

    const { charges, key: record } = await customer.api.demo.checkout.query({ key });
    expect(charges).toHaveLength(0);
    expect(record).toBeNull();
  });

  it('ten submits in one task send one Pay', async () => {
    const customer = await shopper();
    const { page } = customer;
    const key = await atCheckout(page);
    const pays: string[] = [];
    page.on('request', (request) => {
      if (request.url().includes('checkout.pay')) pays.push(request.url());
    });
    await page.evaluate(() => {
      const form = document.querySelector('[data-testid=checkout-form] form') as HTMLFormElement;
      for (let count = 0; count < 10; count++) form.requestSubmit();
    });
    await page.waitForURL(/\/orders\//, { timeout: WAIT_MS });
    expect(pays).toHaveLength(1);
    const { charges } = await customer.api.demo.checkout.query({ key });
    expect(charges.filter((charge) => charge.outcome === 'charged')).toHaveLength(1);
  });

  it('says so when a link names no checkout, and an empty one opens the cart’s', async () => {
    const { page } = await shopper();
    await page.goto('/checkout?checkout=co_00000000-0000-4000-8000-000000000000');
    await page.getByText(/No checkout co_0{8}/).waitFor({ timeout: WAIT_MS });

    await page.goto('/checkout?checkout=');
    await page.getByTestId('cart-total').getByText('€30.50').waitFor({ timeout: WAIT_MS });
    expect(await checkoutKeyOf(page)).toMatch(/^co_/);
  });
});
