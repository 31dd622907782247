import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Writable } from 'node:stream';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Where the app under test listens, e.g. http://127.0.0.1:41234. */
    baseUrl: string;
    /** The secret the app checks payment webhooks' signatures with. */
    webhookSecret: string;
  }
}

const appDir = path.resolve(import.meta.dirname, '..');
export const artifactsDir = path.join(appDir, 'artifacts');
const READY_TIMEOUT_MS = 90_000;

/**
 * Builds the app (through turbo, so the @idem/* packages are built first and an unchanged
 * app is a cache hit) unless turbo already did as this task's dependency, then starts
 * `next start` on a free port with a fresh PGlite data folder, and stops it afterwards.
 */
export default async function setup(project: TestProject) {
  mkdirSync(artifactsDir, { recursive: true });
  if (!process.env.TURBO_HASH) build();

  const dataDir = mkdtempSync(path.join(tmpdir(), 'idem-checkout-e2e-'));
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  // Tests that post webhooks themselves sign them as the provider does.
  const webhookSecret = randomBytes(32).toString('hex');
  const log = createWriteStream(path.join(artifactsDir, 'server.log'));
  const server = spawnDemo(port, dataDir, log, { PAYMENT_WEBHOOK_SECRET: webhookSecret });

  try {
    await waitUntilReady(baseUrl, server);
  } catch (error) {
    await stop(server);
    throw error;
  }
  project.provide('baseUrl', baseUrl);
  project.provide('webhookSecret', webhookSecret);

  return async () => {
    await stop(server);
    log.end();
    rmSync(dataDir, { recursive: true, force: true });
  };
}

/**
 * `next start` of the built demo on `port`, its PGlite database in `dataDir` and its output
 * in `log`; `settings` adds to (or overrides) the environment below.
 */
export function spawnDemo(
  port: number,
  dataDir: string,
  log: Writable,
  settings: Record<string, string>,
): ChildProcess {
  const env = { ...process.env };
  // Always the embedded database in its own folder, and the in-process relay: a shared
  // Postgres or NATS (CI exports both for other packages' tests) would mix tests' data.
  delete env.DATABASE_URL;
  delete env.NATS_URL;
  const server = spawn(
    path.join(appDir, 'node_modules/.bin/next'),
    ['start', '--port', String(port), '--hostname', '127.0.0.1'],
    {
      cwd: appDir,
      env: {
        ...env,
        NODE_ENV: 'production',
        PORT: String(port),
        DEMO_DATA_DIR: path.join(dataDir, 'pglite'),
        // Only the test cards decide declines: no random ones.
        DEMO_RANDOM_DECLINE_RATE: '0',
        NEXT_TELEMETRY_DISABLED: '1',
        ...settings,
      },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  server.stdout?.pipe(log);
  server.stderr?.pipe(log);
  return server;
}

function build() {
  const result = spawnSync(
    'pnpm',
    ['exec', 'turbo', 'run', 'build', '--filter=@idem/checkout', '--output-logs=errors-only'],
    { cwd: appDir, stdio: 'inherit', env: { ...process.env, NEXT_TELEMETRY_DISABLED: '1' } },
  );
  if (result.status !== 0) throw new Error('building the checkout app failed (see above)');
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() =>
        typeof address === 'object' && address
          ? resolve(address.port)
          : reject(new Error('no port')),
      );
    });
  });
}

export async function waitUntilReady(baseUrl: string, server: ChildProcess) {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let exited = false;
  server.once('exit', () => {
    exited = true;
  });
  while (Date.now() < deadline) {
    if (exited) {
      throw new Error(`next start exited early; see ${path.join(artifactsDir, 'server.log')}`);
    }
    try {
      const response = await fetch(`${baseUrl}/api/trpc/demo.totals`);
      if (response.ok) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`the app was not ready within ${READY_TIMEOUT_MS} ms at ${baseUrl}`);
}

/** SIGTERM to the server's process group, SIGKILL if it is still there after 10 s. */
export async function stop(server: ChildProcess) {
  const { pid } = server;
  if (server.exitCode !== null || server.signalCode !== null || pid === undefined) return;
  const exited = new Promise<void>((resolve) => server.once('exit', () => resolve()));
  const signal = (name: NodeJS.Signals) => {
    try {
      process.kill(-pid, name);
    } catch {
      // Already gone.
    }
  };
  signal('SIGTERM');
  const timer = setTimeout(() => signal('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}
