import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import superjson from 'superjson';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { until } from './fixtures/deferred.js';
import { backends, createScratchDatabase } from './harness.js';
import { mutate } from './httpClient.js';

const packageDir = fileURLToPath(new URL('..', import.meta.url));
const serverScript = fileURLToPath(new URL('./fixtures/crashServer.ts', import.meta.url));

interface ServerProcess {
  url: string;
  child: ChildProcess;
  /** Resolves when the server printed `line`. */
  printed(line: string): Promise<void>;
  exited: Promise<unknown>;
}

const running = new Set<ChildProcess>();

/** Starts crashServer.ts in a new Node process (TypeScript through tsx, sources of @idem/*). */
async function startServer(database: string, env: Record<string, string> = {}) {
  const child = spawn(
    process.execPath,
    ['--conditions=@idem/source', '--import', 'tsx', serverScript],
    {
      cwd: packageDir,
      env: { ...process.env, IDEM_DATABASE: database, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  running.add(child);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  exited.then(() => running.delete(child));
  let output = '';
  let errors = '';
  const waiters: { line: string; resolve: () => void }[] = [];
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString();
    for (const waiter of waiters) if (output.includes(waiter.line)) waiter.resolve();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    errors += chunk.toString();
  });
  const printed = (line: string) =>
    new Promise<void>((resolve, reject) => {
      if (output.includes(line)) return resolve();
      waiters.push({ line, resolve });
      exited.then(() => reject(new Error(`server exited before printing ${line}:\n${errors}`)));
    });
  await printed('LISTENING ');
  const url = /LISTENING (\S+)/.exec(output)?.[1];
  if (url === undefined) throw new Error(`the server printed no URL after LISTENING:\n${output}`);
  return { url, child, printed, exited } satisfies ServerProcess;
}

async function stop(server: ServerProcess) {
  if (server.child.exitCode === null && server.child.signalCode === null) {
    server.child.kill('SIGTERM');
  }
  await server.exited;
}

async function query(url: string, path: string): Promise<unknown> {
  const response = await fetch(`${url}/trpc/${path}`);
  const body = (await response.json()) as {
    result: { data: Parameters<typeof superjson.deserialize>[0] };
  };
  return superjson.deserialize(body.result.data);
}

for (const backend of backends) {
  describe(`a server killed with SIGKILL after the claim, on ${backend}`, () => {
    let database = '';
    let cleanup = async () => {};

    beforeAll(async () => {
      if (backend === 'PGlite') {
        // File-backed, opened by one process at a time.
        const dir = await mkdtemp(join(tmpdir(), 'idem-crash-'));
        database = `pglite:${dir}`;
        cleanup = () => rm(dir, { recursive: true, force: true });
      } else {
        const scratch = await createScratchDatabase();
        database = `postgres:${scratch.url}`;
        cleanup = () => scratch.drop();
      }
    });
    afterEach(async () => {
      for (const child of running) child.kill('SIGKILL');
      await until(() => running.size === 0, { what: 'child processes to exit' });
    });
    afterAll(() => cleanup());

    it('is taken over by a new process after the lease, which resumes after the finished step', async () => {
      const key = randomUUID();
      const crashing = await startServer(database, { CRASH_AFTER: 'reserve' });
      const lost = mutate(crashing.url, 'checkout', { order: 1 }, { 'Idempotency-Key': key }).then(
        () => 'answered',
        () => 'connection lost',
      );
      await crashing.printed('CRASH_POINT');
      crashing.child.kill('SIGKILL');
      await crashing.exited;
      expect(await lost).toBe('connection lost');

      const fresh = await startServer(database);
      try {
        const retried = await until(
          async () => {
            const response = await mutate(
              fresh.url,
              'checkout',
              { order: 1 },
              {
                'Idempotency-Key': key,
              },
            );
            if (response.status !== 409) return response;
            expect(response.error?.data.idempotency?.code).toBe('REQUEST_IN_PROGRESS');
            return undefined;
          },
          { what: 'the lease of the killed server to run out', intervalMs: 50 },
        );
        expect(retried.status).toBe(200);
        expect(retried.data).toEqual({
          reservation: { by: 1 }, // saved by the killed process, not run again
          charge: { by: 2 },
          attempt: 2,
          takeover: true,
        });
        expect(await query(fresh.url, 'effects')).toEqual({ charge: 1, reserve: 1 });

        const replay = await mutate(
          fresh.url,
          'checkout',
          { order: 1 },
          { 'Idempotency-Key': key },
        );
        expect(replay.headers.get('idempotent-replayed')).toBe('true');
        expect(replay.data).toEqual(retried.data);
        expect(await query(fresh.url, 'effects')).toEqual({ charge: 1, reserve: 1 });
      } finally {
        await stop(fresh);
      }
      // Two server processes start here (tsx, and on PGlite a file-backed database each):
      // about 6 s on an idle machine, and more than 60 s once on one whose 2 cores ran every
      // package's suite and two benchmarks at the same time.
    }, 180_000);
  });
}
