import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { promisify } from 'node:util';
import postgres from 'postgres';
import { ADMIN_DATABASE_URL, quiet } from '../lib/config.js';

const run = promisify(execFile);

/** The machine's only cluster: `/etc/postgresql/<version>/main`. */
function cluster(): string {
  const latest = readdirSync('/etc/postgresql').sort().at(-1);
  if (latest === undefined) throw new Error('no PostgreSQL cluster under /etc/postgresql');
  return latest;
}

/** Restarts the local PostgreSQL (fast shutdown: sessions are cut off) and waits until it answers. */
export async function restartPostgres(): Promise<number> {
  const started = Date.now();
  await run('pg_ctlcluster', ['--skip-systemctl-redirect', cluster(), 'main', 'restart'], {
    timeout: 120_000,
  });
  await waitForPostgres(60_000);
  return Date.now() - started;
}

/** Resolves once a query succeeds; starts the cluster if it is down for good. */
export async function ensurePostgresUp(timeoutMs = 60_000): Promise<void> {
  try {
    await waitForPostgres(5_000);
  } catch {
    await run('pg_ctlcluster', ['--skip-systemctl-redirect', cluster(), 'main', 'start'], {
      timeout: 120_000,
    }).catch(() => undefined);
    await waitForPostgres(timeoutMs);
  }
}

async function waitForPostgres(timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const sql = postgres(ADMIN_DATABASE_URL, { ...quiet, max: 1, connect_timeout: 2 });
    try {
      await sql`select 1`;
      return;
    } catch (error) {
      if (Date.now() > deadline)
        throw new Error(`PostgreSQL did not come back within ${timeoutMs} ms`, { cause: error });
      await new Promise((resolve) => setTimeout(resolve, 250));
    } finally {
      await sql.end({ timeout: 1 }).catch(() => undefined);
    }
  }
}
