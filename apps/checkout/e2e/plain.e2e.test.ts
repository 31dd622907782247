import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { freePort, stop } from './globalSetup';
import {
  confirmationOf,
  type DemoServer,
  demoApi,
  openPlainCheckout,
  plainContext,
  recordPosts,
  startDemoServer,
} from './plainShopper';
import {
  expectExactlyOnce,
  launchChromium,
  PHONE,
  screenshot,
  settledDatabase,
  WAIT_MS,
  waitForCounts,
} from './shopper';

/**
 * The checkout without JavaScript: a plain `<form action>` posted to an idempotent Server
 * Action, keyed by a hidden field that holds the checkout's id. Every way a browser sends
 * that form twice ends in one charge, one order and one email in the database.
 */
const baseUrl = inject('baseUrl');

const api = demoApi(baseUrl);

let browser: Browser | undefined;
const contexts: BrowserContext[] = [];
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  for (const context of contexts) await context.close();
  await browser?.close();
});

/** A new browser context (JavaScript off unless asked) and a page in it. */
async function plainPage(javaScriptEnabled = false, url = baseUrl): Promise<Page> {
  if (!browser) throw new Error('plainPage: made inside a test, after beforeAll');
  const context = await plainContext(browser, url, javaScriptEnabled);
  contexts.push(context);
  return context.newPage();
}

/** The database for checkout `key` once settled: one charge, one order, one email, key completed. */
/** Nothing wider than a phone's screen (as `e2e/phone.e2e.test.ts` checks the other pages). */
async function fitsThePhone(page: Page, name: string) {
  const scrollWidth = await page.evaluate(() => document.documentElement.scrollWidth);
  await screenshot(page, `phone-${name}`);
  expect(scrollWidth, `${name}: ${scrollWidth} px wide`).toBeLessThanOrEqual(PHONE.width);
}

async function expectPaidOnce(key: string, client = api) {
  const database = await settledDatabase(client, key);
  expectExactlyOnce(database);
  expect(database.orders[0]?.totalCents).toBe(3050);
  return database;
}

describe('the plain checkout, JavaScript off', () => {
  it('a full checkout: the cart form, the pay form, the confirmation in the POST answer', async () => {
    const page = await plainPage();
    const posts = recordPosts(page);
    const key = await openPlainCheckout(page);
    // The key is the checkout's id, rendered with the form as a hidden field.
    expect(await page.locator('input[type=hidden][name=idempotency-key]').inputValue()).toBe(key);
    await page.getByTestId('pay').click();

    const answer = await confirmationOf(page);
    expect(answer).toMatchObject({ checkoutId: key, replayed: false });
    expect(answer.executedBy).toBe(answer.requestId);
    // The answer to the POST is the page: no redirect, so a reload is a resubmission.
    expect(new URL(page.url()).search).toBe(`?checkout=${key}`);
    expect(posts.filter((post) => post.key === key)).toHaveLength(1);
    await screenshot(page, 'p-plain-no-js');

    const database = await expectPaidOnce(key);
    expect(database.charged[0]?.requests).toBe(1);
    expect(database.key).toMatchObject({ attempts: 1, recoveryPoints: ['charge', 'order'] });
    // The order page (JavaScript on) shows the same one of each.
    const orderPage = await plainPage(true);
    await orderPage.goto(`/orders/${answer.orderId}`);
    await waitForCounts(orderPage, { charges: 1, orders: 1, emails: 1 });
  });

  it('double click on Pay: two POSTs with one key, the second gets the first one’s result', async () => {
    const page = await plainPage();
    const posts = recordPosts(page);
    const key = await openPlainCheckout(page);
    // A person's double click: the second click comes while the first POST is out (two
    // clicks in one task are one submission to Chromium, as the HTML spec says).
    const box = await page.getByTestId('pay').boundingBox();
    if (!box) throw new Error('Pay is not on screen');
    const [x, y] = [box.x + box.width / 2, box.y + box.height / 2];
    const firstPost = page.waitForRequest((request) => request.method() === 'POST');
    await page.mouse.click(x, y);
    await firstPost;
    await page.mouse.click(x, y);

    const answer = await confirmationOf(page);
    expect(posts.filter((post) => post.key === key)).toHaveLength(2);
    // The page shows the answer to the second POST: the stored result of the first.
    expect(answer.replayed).toBe(true);
    expect(answer.executedBy).not.toBe(answer.requestId);
    await screenshot(page, 'q-plain-double-click');
    expect((await expectPaidOnce(key)).charged[0]?.requests).toBe(1);
  });

  it('Enter pressed twice in the form: two POSTs with one key, one payment', async () => {
    const page = await plainPage();
    const posts = recordPosts(page);
    const key = await openPlainCheckout(page);
    await page.locator('input[name=email]').focus();
    // As with the double click, the second Enter comes while the first POST is out.
    const firstPost = page.waitForRequest((request) => request.method() === 'POST');
    await page.keyboard.press('Enter');
    await firstPost;
    await page.keyboard.press('Enter');

    const answer = await confirmationOf(page);
    expect(posts.filter((post) => post.key === key)).toHaveLength(2);
    expect(answer.replayed).toBe(true);
    expect((await expectPaidOnce(key)).charged[0]?.requests).toBe(1);
  });

  it('a reload of the POST answer sends the form again: replayed, nothing charged again', async () => {
    const page = await plainPage();
    const posts = recordPosts(page);
    const key = await openPlainCheckout(page);
    await page.getByTestId('pay').click();
    const first = await confirmationOf(page);
    expect(first.replayed).toBe(false);

    // Chromium resends the POST on reload (headless: no "confirm resubmission" prompt).
    const reloaded = await page.reload();
    expect(reloaded?.request().method()).toBe('POST');
    const second = await confirmationOf(page);
    // The server answered the second POST (another request id), from the stored result.
    expect(posts.filter((post) => post.key === key)).toHaveLength(2);
    expect(second.requestId).not.toBe(first.requestId);
    expect(second).toMatchObject({ replayed: true, orderId: first.orderId });
    expect(second.executedBy).toBe(first.requestId);
    await screenshot(page, 'r-plain-reload');
    expect((await expectPaidOnce(key)).charged[0]?.requests).toBe(1);
  });

  it('Back, then Pay again: the same key, the stored result', async () => {
    const page = await plainPage();
    const posts = recordPosts(page);
    const key = await openPlainCheckout(page);
    await page.getByTestId('pay').click();
    const first = await confirmationOf(page);

    await page.goBack();
    await page.waitForURL(`**/checkout/plain?checkout=${key}`, { timeout: WAIT_MS });
    await page.getByTestId('plain-already-paid').waitFor({ timeout: WAIT_MS });
    await page.getByTestId('pay').click();
    const second = await confirmationOf(page);
    expect(posts.filter((post) => post.key === key)).toHaveLength(2);
    expect(second).toMatchObject({ replayed: true, orderId: first.orderId });
    expect(second.executedBy).toBe(first.requestId);
    expect((await expectPaidOnce(key)).charged[0]?.requests).toBe(1);
  });

  it('a paid checkout sent again with other details says it was already submitted, never "not paid"', async () => {
    const page = await plainPage();
    const key = await openPlainCheckout(page);
    await page.locator('input[name=email]').fill('bob@example.com');
    await page.getByTestId('pay').click();
    await confirmationOf(page);

    // The link again later: the form holds its defaults, not bob's address.
    await page.goto(`/checkout/plain?checkout=${key}`);
    await page.getByTestId('plain-already-paid').waitFor({ timeout: WAIT_MS });
    await page.getByTestId('pay').click();
    const refused = page.getByTestId('plain-error');
    await refused.waitFor({ timeout: WAIT_MS });
    expect(await refused.getAttribute('data-code')).toBe('KEY_MISMATCH');
    expect(await refused.textContent()).toMatch(/^Already submitted\./);
    expect(await refused.textContent()).not.toMatch(/not paid/i);
    await refused.getByRole('link', { name: 'See how this checkout stands' }).click();
    await page.getByTestId('plain-already-paid').waitFor({ timeout: WAIT_MS });
    expect((await expectPaidOnce(key)).charged[0]?.requests).toBe(1);
  });

  it('two tabs of the same cart: one checkout, both submitted at once, one payment', async () => {
    const first = await plainPage();
    const second = await first.context().newPage();
    const key = await openPlainCheckout(first);
    // The same products in the second tab open the same checkout: the same key.
    expect(await openPlainCheckout(second)).toBe(key);

    await Promise.all([first.getByTestId('pay').click(), second.getByTestId('pay').click()]);
    const answers = await Promise.all([confirmationOf(first), confirmationOf(second)]);
    expect(answers[0].orderId).toBe(answers[1].orderId);
    // One tab's POST ran the payment, the other's got its stored result.
    expect(answers.map((answer) => answer.replayed).sort()).toEqual([false, true]);
    expect(answers[0].executedBy).toBe(answers[1].executedBy);
    await screenshot(second, 's-plain-two-tabs');
    expect((await expectPaidOnce(key)).charged[0]?.requests).toBe(1);
  });

  it('a declined card at 390 px: the stored decline, then another card pays the cart’s next checkout', async () => {
    const page = await plainPage();
    await page.setViewportSize(PHONE);
    const declined = await openPlainCheckout(page);
    await fitsThePhone(page, 'plain-checkout');
    await page.locator('input[name=cardNumber]').fill('4000 0000 0000 0002');
    await page.getByTestId('pay').click();
    await page.getByTestId('plain-declined').waitFor({ timeout: WAIT_MS });
    await fitsThePhone(page, 'plain-declined');
    // The decline is the key's stored answer: the reload's POST gets it again.
    await page.reload();
    await page.getByTestId('plain-declined').waitFor({ timeout: WAIT_MS });

    await page.getByRole('link', { name: 'Pay with another card' }).click();
    await page.waitForURL(/\/checkout\/plain\?checkout=co_/, { timeout: WAIT_MS });
    const next = await page.getByTestId('plain-lines').getAttribute('data-checkout-id');
    expect(next).toMatch(/^co_/);
    expect(next).not.toBe(declined);
    await page.getByTestId('pay').click();
    expect((await confirmationOf(page)).checkoutId).toBe(next);
    await fitsThePhone(page, 'plain-confirmation');

    expect((await expectPaidOnce(next ?? '')).charged[0]?.requests).toBe(1);
    const first = await api.demo.checkout.query({ key: declined });
    expect(first.charges.map((charge) => [charge.outcome, charge.requests])).toEqual([
      ['declined', 1],
    ]);
    expect(first.orders).toHaveLength(0);
    expect(first.key).toMatchObject({ status: 'completed', attempts: 1 });
  });

  it('the JavaScript checkout links to the plain one for the same checkout', async () => {
    const page = await plainPage(true);
    await page.goto('/');
    await page.getByTestId('product-sencha').getByRole('button', { name: 'Add to cart' }).click();
    await page.getByTestId('product-mug').getByRole('button', { name: 'Add to cart' }).click();
    await page.goto('/checkout');
    const link = page.getByTestId('plain-checkout-link').getByRole('link');
    await link.waitFor({ timeout: WAIT_MS });
    const href = await link.getAttribute('href');
    const key = href?.split('checkout=')[1] ?? '';
    expect(key).toMatch(/^co_/);

    // The link in a browser without JavaScript pays that checkout.
    const plain = await plainPage();
    await plain.goto(href ?? '');
    await plain.getByTestId('pay').click();
    expect((await confirmationOf(plain)).checkoutId).toBe(key);
    expect((await expectPaidOnce(key)).charged[0]?.requests).toBe(1);
    // Back in the JavaScript tab, the checkout is paid: no second payment is offered.
    await page.reload();
    await page.getByTestId('already-paid').waitFor({ timeout: WAIT_MS });
  });
});

describe('the plain checkout when the server is killed after the charge', () => {
  let server: DemoServer | undefined;
  let dataDir: string | undefined;
  afterAll(async () => {
    if (server) await stop(server.process);
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('SIGKILL after the charge, restart, resubmit: the takeover finds the charge, one order', async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'idem-checkout-kill-'));
    const port = await freePort();
    server = await startDemoServer(port, dataDir, 'plain-kill-server.log');
    const killedApi = demoApi(server.baseUrl);
    const page = await plainPage(false, server.baseUrl);
    const posts = recordPosts(page);
    const key = await openPlainCheckout(page);
    await page.getByTestId('kill-after-charge').check();

    // The server kills itself (SIGKILL) right after the charge: the POST gets no answer.
    const navigation = page.getByTestId('pay').click();
    await server.exited;
    expect(server.process.signalCode).toBe('SIGKILL');
    await navigation.catch(() => undefined);

    server = await startDemoServer(port, dataDir, 'plain-kill-server.log');
    // Charged, and the key in progress with no order: what the kill left behind.
    const left = await killedApi.demo.checkout.query({ key });
    expect(left.charges.filter((charge) => charge.outcome === 'charged')).toHaveLength(1);
    expect(left.orders).toHaveLength(0);
    expect(left.key).toMatchObject({ status: 'in_progress', attempts: 1 });

    // Reloading the failed POST sends the form again, with the same key.
    await page.reload().catch(() => undefined);
    const answer = await confirmationOf(page);
    expect(posts.filter((post) => post.key === key)).toHaveLength(2);
    expect(answer).toMatchObject({ checkoutId: key, replayed: false });
    expect(await page.getByTestId('plain-answer').textContent()).toContain('attempt 2');
    await screenshot(page, 't-plain-kill-restart');

    // A restart on a loaded machine can outlast ABANDONED_AFTER_MS, and then the server's
    // own sweep of abandoned payments runs beside the resubmission: give both time to end.
    const database = await settledDatabase(killedApi, key, 4 * WAIT_MS);
    expectExactlyOnce(database);
    // The takeover got the charge from its recovery point and placed the one order.
    expect(database.key).toMatchObject({ attempts: 2, recoveryPoints: ['charge', 'order'] });
    // The provider was asked once, or twice when the server's own sweep of abandoned
    // payments came first (the lease over for 15 s: a slow restart), which asks it again
    // with the checkout's charge key and gets the same charge back.
    expect([1, 2]).toContain(database.charged[0]?.requests);
  }, 240_000);
});
