import path from 'node:path';
import { createTRPCClient, httpLink } from '@trpc/client';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import superjson from 'superjson';
import { afterAll, beforeAll } from 'vitest';
import type { AppRouter } from '../src/server/routers/appRouter';

export const artifactsDir = path.resolve(import.meta.dirname, '../artifacts');

/** Debian's Chromium (CI installs it with apt-get), headless, with a fresh profile. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    headless: true,
    // playwright-core gives every launch a fresh temporary --user-data-dir.
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-quic',
      '--no-first-run',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** Upper bound of every wait for the page: a retry after a crash takes ~2 s of lease. */
export const WAIT_MS = 30_000;

export interface Shopper {
  page: Page;
  context: BrowserContext;
  /** The demo's server API as this shopper's session: what the database holds. */
  api: ReturnType<typeof createTRPCClient<AppRouter>>;
}

/** A phone's screen: the width every page must fit. */
export const PHONE = { width: 390, height: 844 };

/**
 * A new browser context (own localStorage: cart, session), by default with two products
 * in the cart (`fill: false`: an empty one, like a second browser given a link). With
 * `pay`, it then pays as `payWith` does, with that query string's chaos (and `cardNumber`).
 */
export async function newShopper(
  browser: Browser,
  baseUrl: string,
  options: {
    fill?: boolean;
    viewport?: { width: number; height: number };
    pay?: string;
    cardNumber?: string;
  } = {},
): Promise<Shopper> {
  const context = await browser.newContext({
    baseURL: baseUrl,
    viewport: options.viewport ?? { width: 1280, height: 900 },
  });
  const page = await context.newPage();
  await page.goto('/');
  if (options.fill !== false) {
    await page.getByTestId('product-sencha').getByRole('button', { name: 'Add to cart' }).click();
    await page.getByTestId('product-mug').getByRole('button', { name: 'Add to cart' }).click();
    await page.getByTestId('cart-total').getByText('€30.50').waitFor({ timeout: WAIT_MS });
  }
  await page.waitForFunction(() => localStorage.getItem('idem-demo-session'), undefined, {
    timeout: WAIT_MS,
  });
  const sessionId = await page.evaluate(() => localStorage.getItem('idem-demo-session'));
  if (!sessionId) throw new Error('the page set no session id');
  const api = createTRPCClient<AppRouter>({
    links: [
      httpLink({
        url: `${baseUrl}/api/trpc`,
        transformer: superjson,
        headers: { 'x-demo-session': sessionId },
      }),
    ],
  });
  if (options.pay !== undefined) await payWith(page, options.pay, options.cardNumber);
  return { page, context, api };
}

/**
 * One Chromium for a test file: launched before its tests, closed after them together with
 * every shopper the returned function made.
 */
export function shoppersIn(baseUrl: string) {
  let browser: Browser | undefined;
  const made: Shopper[] = [];
  beforeAll(async () => {
    browser = await launchChromium();
  });
  afterAll(async () => {
    for (const shopper of made) await shopper.context.close();
    await browser?.close();
  });
  return async (options?: Parameters<typeof newShopper>[2]): Promise<Shopper> => {
    if (!browser) throw new Error('shoppersIn: a shopper is made inside a test, after beforeAll');
    const created = await newShopper(browser, baseUrl, options);
    made.push(created);
    return created;
  };
}

/** Opens the checkout with chaos from the query string and presses Pay. */
export async function payWith(
  page: Page,
  query: string,
  cardNumber?: string,
  total = '€30.50',
): Promise<void> {
  await page.goto(`/checkout${query}`);
  await page.getByTestId('cart-total').getByText(total).waitFor({ timeout: WAIT_MS });
  if (cardNumber) await page.locator('input[name=cardNumber]').fill(cardNumber);
  await page.getByTestId('pay').click();
}

/** Waits until the element with this test id shows `text`. */
export async function waitForText(page: Page, testId: string, text: string): Promise<void> {
  await page.getByTestId(testId).getByText(text).waitFor({ timeout: WAIT_MS });
}

/** Waits for the order page, its tiles showing one charge, one order and one email. */
export async function waitForPaidOrder(page: Page): Promise<void> {
  await page.waitForURL(/\/orders\//, { timeout: WAIT_MS });
  await waitForCounts(page, { charges: 1, orders: 1, emails: 1 });
}

/** Waits until the panel lists an attempt with this outcome. */
export async function waitForAttempt(page: Page, outcome: string): Promise<void> {
  await page
    .locator(`[data-testid=attempt][data-outcome=${outcome}]`)
    .waitFor({ timeout: WAIT_MS });
}

/** Waits until the panel's three tiles show these counts. */
export async function waitForCounts(
  page: Page,
  counts: { charges: number; orders: number; emails: number },
): Promise<void> {
  for (const [name, count] of Object.entries(counts)) {
    await page
      .locator(`[data-testid="count-${name}"][data-count="${count}"]`)
      .waitFor({ timeout: WAIT_MS });
  }
}

/** The outcome of every attempt the panel lists, in order. */
export async function attemptOutcomes(page: Page): Promise<string[]> {
  return page
    .getByTestId('attempt')
    .evaluateAll((rows) => rows.map((row) => row.getAttribute('data-outcome') ?? ''));
}

/** The checkout key the panel shows (the checkout's id), once the page has one. */
export async function checkoutKeyOf(page: Page): Promise<string> {
  const panel = page.locator('[data-testid=what-happened][data-key]');
  await panel.waitFor({ timeout: WAIT_MS });
  const key = await panel.getAttribute('data-key');
  if (!key) throw new Error('the panel shows no checkout key');
  return key;
}

export async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(artifactsDir, `${name}.png`), fullPage: true });
}

/** Polls `probe` until it returns a value other than undefined (a generous bound, no sleeps as assertions). */
export async function eventually<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = WAIT_MS,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * What the database holds for one checkout once everything has settled: the email (which
 * follows the order through the outbox) has arrived, and no idempotency key is left in
 * progress anywhere (a key whose attempt died is taken over by the next one once its
 * lease has passed).
 */
export async function settledDatabase(
  api: Shopper['api'],
  checkoutKey: string,
  timeoutMs = WAIT_MS,
) {
  await eventually(
    'no key in progress',
    async () => ((await api.demo.totals.query()).keysInProgress === 0 ? true : undefined),
    timeoutMs,
  );
  const checkout = await eventually(
    'the confirmation email',
    async () => {
      const found = await api.demo.checkout.query({ key: checkoutKey });
      return found.emails.length > 0 ? found : undefined;
    },
    timeoutMs,
  );
  return {
    ...checkout,
    charged: checkout.charges.filter((charge) => charge.outcome === 'charged'),
    keysInProgress: (await api.demo.totals.query()).keysInProgress,
  };
}

/** Exactly one charge (the provider asked once), one order and one email for the checkout. */
export function expectExactlyOnce(database: Awaited<ReturnType<typeof settledDatabase>>) {
  const problems: string[] = [];
  if (database.charged.length !== 1) problems.push(`${database.charged.length} charges`);
  if (database.orders.length !== 1) problems.push(`${database.orders.length} orders`);
  if (database.emails.length !== 1) problems.push(`${database.emails.length} emails`);
  if (database.key?.status !== 'completed') problems.push(`key ${database.key?.status}`);
  if (database.keysInProgress !== 0) problems.push(`${database.keysInProgress} keys in progress`);
  if (problems.length > 0) throw new Error(`not exactly once: ${problems.join(', ')}`);
}
