import path from 'node:path';
import { createTRPCClient, httpLink } from '@trpc/client';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import superjson from 'superjson';
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

/** A new browser context (own localStorage: cart, session) with two products in the cart. */
export async function newShopper(browser: Browser, baseUrl: string): Promise<Shopper> {
  const context = await browser.newContext({
    baseURL: baseUrl,
    viewport: { width: 1280, height: 900 },
  });
  const page = await context.newPage();
  await page.goto('/');
  await page.getByTestId('product-sencha').getByRole('button', { name: 'Add to cart' }).click();
  await page.getByTestId('product-mug').getByRole('button', { name: 'Add to cart' }).click();
  await page.getByTestId('cart-total').getByText('€30.50').waitFor({ timeout: WAIT_MS });
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
  return { page, context, api };
}

/** Opens the checkout with chaos from the query string and presses Pay. */
export async function payWith(page: Page, query: string, cardNumber?: string): Promise<void> {
  await page.goto(`/checkout${query}`);
  await page.getByTestId('cart-total').getByText('€30.50').waitFor({ timeout: WAIT_MS });
  if (cardNumber) await page.locator('input[name=cardNumber]').fill(cardNumber);
  await page.getByTestId('pay').click();
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

/** The checkout key the panel shows. */
export async function checkoutKeyOf(page: Page): Promise<string> {
  const key = await page.getByTestId('what-happened').getAttribute('data-key');
  if (!key) throw new Error('the panel shows no checkout key');
  return key;
}

export async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(artifactsDir, `${name}.png`), fullPage: true });
}
