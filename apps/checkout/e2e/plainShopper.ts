import type { ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import path from 'node:path';
import { createTRPCClient, httpLink } from '@trpc/client';
import type { BrowserContext, Page } from 'playwright-core';
import superjson from 'superjson';
import type { AppRouter } from '../src/server/routers/appRouter';
import { spawnDemo, stop, waitUntilReady } from './globalSetup';
import { artifactsDir, WAIT_MS } from './shopper';

/** The demo's server API at `baseUrl`, for what its database holds (no session needed). */
export function demoApi(baseUrl: string) {
  return createTRPCClient<AppRouter>({
    links: [httpLink({ url: `${baseUrl}/api/trpc`, transformer: superjson })],
  });
}

/** A browser context for the plain checkout, by default with JavaScript off. */
export function plainContext(
  browser: { newContext: (options: object) => Promise<BrowserContext> },
  baseUrl: string,
  javaScriptEnabled = false,
): Promise<BrowserContext> {
  return browser.newContext({
    baseURL: baseUrl,
    javaScriptEnabled,
    viewport: { width: 1280, height: 900 },
  });
}

/**
 * Fills the plain cart form (a sencha and a mug: €30.50) and continues; returns the id of
 * the checkout the server opened, which the pay form carries as its key.
 */
export async function openPlainCheckout(page: Page): Promise<string> {
  await page.goto('/checkout/plain');
  await page.locator('#qty-sencha').fill('1');
  await page.locator('#qty-mug').fill('1');
  await page.getByTestId('plain-continue').click();
  await page.waitForURL(/\/checkout\/plain\?checkout=co_/, { timeout: WAIT_MS });
  await page.getByTestId('plain-total').getByText('€30.50').waitFor({ timeout: WAIT_MS });
  const id = await page.getByTestId('plain-lines').getAttribute('data-checkout-id');
  if (!id) throw new Error('the plain checkout page shows no checkout id');
  return id;
}

/** What the confirmation on the page says: which request ran the payment, which answered. */
export async function confirmationOf(page: Page) {
  const confirmation = page.getByTestId('plain-confirmation');
  await confirmation.waitFor({ timeout: WAIT_MS });
  const data = await confirmation.evaluate((element) => ({ ...(element as HTMLElement).dataset }));
  return {
    orderId: data.orderId ?? '',
    checkoutId: data.checkoutId ?? '',
    requestId: data.requestId ?? '',
    executedBy: data.executedBy ?? '',
    replayed: data.replayed === 'true',
  };
}

/**
 * Every form POST the page sends to the plain checkout, with the `idempotency-key` field
 * of its body: the browser's side of "the same key was sent again".
 */
export function recordPosts(page: Page): { url: string; key: string | undefined }[] {
  const posts: { url: string; key: string | undefined }[] = [];
  page.on('request', (request) => {
    if (request.method() !== 'POST' || !request.url().includes('/checkout/plain')) return;
    const body = request.postData() ?? '';
    const key = /name="idempotency-key"\r\n\r\n([^\r\n]*)\r\n/.exec(body)?.[1];
    posts.push({ url: request.url(), key });
  });
  return posts;
}

/** A `next start` of the built demo of its own, on PGlite in `dataDir`: one the test may kill. */
export interface DemoServer {
  baseUrl: string;
  process: ChildProcess;
  /** Settles when the process has exited (on its own, or killed). */
  exited: Promise<void>;
}

/**
 * Starts the built demo on `port` with `dataDir` as its database folder, with the
 * "kill after charge" switch on (`DEMO_KILL_SWITCH=1`), and waits until it answers.
 */
export async function startDemoServer(
  port: number,
  dataDir: string,
  logName: string,
): Promise<DemoServer> {
  const log = createWriteStream(path.join(artifactsDir, logName), { flags: 'a' });
  const child = spawnDemo(port, dataDir, log, { DEMO_KILL_SWITCH: '1' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  exited.then(() => log.end());
  const baseUrl = `http://127.0.0.1:${port}`;
  try {
    await waitUntilReady(baseUrl, child);
  } catch (error) {
    await stop(child);
    throw error;
  }
  return { baseUrl, process: child, exited };
}
