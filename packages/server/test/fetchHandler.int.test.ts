import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isConfigurationError, LeaseLostError } from '@idem/core';
import type { IdempotencyStore, LeaseToken } from '@idem/core/store';
import { manualClock, memoryStore } from '@idem/core/testing';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { DEFAULT_ERROR_DOCS_URL } from '../src/adapter/errorDocs.js';
import {
  DEFAULT_REPLAY_HEADERS,
  type IdempotentHandlerOptions,
  idempotentHandler,
} from '../src/fetch/index.js';
import { backends, countKeys, rows, useDatabase } from './harness.js';

const SQL_OR_STACK = /insert into|select |idem_keys|Failed query|\n\s+at |\.ts:\d+|node_modules/i;
const URL_BASE = 'http://shop.test';

const post = (
  path: string,
  body: BodyInit | undefined,
  headers: Record<string, string> = {},
  init: RequestInit = {},
) =>
  new Request(`${URL_BASE}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    ...(body !== undefined && { body }),
    ...init,
  });

/** `store`, with `method` finding every lease taken over (a `LeaseLostError`). */
const losingLeaseAt = (
  method: 'complete' | 'heartbeat' | 'saveStep',
  store: IdempotencyStore,
): IdempotencyStore => ({
  ...store,
  [method]: async (token: LeaseToken) => {
    throw new LeaseLostError(token.scope, token.key, token.version);
  },
});

/** A body that never ends: 64 KiB chunks for as long as someone reads. */
const endlessBody = () => {
  let sent = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      sent += 1;
      controller.enqueue(new Uint8Array(65_536).fill(120));
    },
  });
  return { stream, chunksSent: () => sent };
};

for (const backend of backends) {
  describe(`idempotentHandler on ${backend}`, () => {
    const database = useDatabase(backend);
    const storedRows = (key: string) => countKeys(database().db, key);
    const options = (extra: Partial<IdempotentHandlerOptions> = {}) => ({
      db: database().db,
      scope: () => 'user:ann',
      ...extra,
    });

    it('answers refusals as RFC 9457 problem+json with a documented type, for 400, 413, 422 and 409', async () => {
      let release = () => {};
      const held = new Promise<void>((resolve) => (release = resolve));
      let arrived = () => {};
      const holding = new Promise<void>((resolve) => (arrived = resolve));
      const handler = idempotentHandler(options({ maxBodyBytes: 64 }), async (request) => {
        const body = (await request.json()) as { hold?: boolean };
        if (body.hold) {
          arrived();
          await held;
        }
        return Response.json({ ok: true });
      });
      const key = randomUUID();
      const answers = {
        missing: await handler(post('/api/orders', '{}')),
        tooLarge: await handler(
          post('/api/orders', JSON.stringify({ pad: 'x'.repeat(100) }), {
            'Idempotency-Key': randomUUID(),
          }),
        ),
        first: await handler(post('/api/orders', '{"n":1}', { 'Idempotency-Key': key })),
        mismatch: await handler(post('/api/orders', '{"n":2}', { 'Idempotency-Key': key })),
      };
      const busyKey = randomUUID();
      const running = handler(post('/api/orders', '{"hold":true}', { 'Idempotency-Key': busyKey }));
      await holding;
      const busy = await handler(
        post('/api/orders', '{"hold":true}', { 'Idempotency-Key': busyKey }),
      );
      release();
      expect((await running).status).toBe(200);

      const expected = [
        [answers.missing, 400, 'INVALID_KEY', 'Invalid idempotency key'],
        [answers.tooLarge, 413, 'INPUT_TOO_LARGE', 'Request body too large'],
        [answers.mismatch, 422, 'KEY_MISMATCH', 'Idempotency key reused for another request'],
        [busy, 409, 'REQUEST_IN_PROGRESS', 'A request with this idempotency key is in progress'],
      ] as const;
      for (const [response, status, code, title] of expected) {
        expect(response.status).toBe(status);
        expect(response.headers.get('content-type')).toBe('application/problem+json');
        const problem = await response.json();
        expect(problem).toMatchObject({
          type: `${DEFAULT_ERROR_DOCS_URL}#${code.toLowerCase()}`,
          title,
          status,
          code,
        });
        expect(typeof problem.detail).toBe('string');
        expect(problem.detail).not.toMatch(SQL_OR_STACK);
      }
      expect(answers.first.status).toBe(200);
      expect(busy.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(busy.headers.get('idempotency-status')).toBe('in-progress');
    });

    it('a replay reproduces the status, the allow-listed headers and the body byte for byte', async () => {
      let runs = 0;
      // Not valid UTF-8, and with a byte-order mark: stored as base64, replayed as the same bytes.
      const bytes = new Uint8Array([0xef, 0xbb, 0xbf, 0x00, 0xff, 0xfe, 0x80, 0x41, 0x0a]);
      const handler = idempotentHandler(options(), () => {
        runs += 1;
        return new Response(bytes, {
          status: 201,
          statusText: 'Created',
          headers: {
            'content-type': 'application/octet-stream',
            location: '/api/files/1',
            etag: '"v1"',
            'set-cookie': 'session=first-request-only',
            'x-trace-id': `trace-${runs}`,
          },
        });
      });
      const key = randomUUID();
      const send = () => handler(post('/api/files', '{"name":"a"}', { 'Idempotency-Key': key }));
      const first = await send();
      const replay = await send();
      expect(runs).toBe(1);
      expect(first.headers.get('set-cookie')).toBe('session=first-request-only');
      expect(first.headers.get('x-trace-id')).toBe('trace-1');
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      expect(replay.status).toBe(201);
      expect(replay.statusText).toBe('Created');
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.headers.get('content-type')).toBe('application/octet-stream');
      expect(replay.headers.get('location')).toBe('/api/files/1');
      expect(replay.headers.get('etag')).toBe('"v1"');
      expect(replay.headers.get('set-cookie')).toBeNull();
      expect(replay.headers.get('x-trace-id')).toBeNull();
      expect(new Uint8Array(await first.arrayBuffer())).toEqual(bytes);
      expect(new Uint8Array(await replay.arrayBuffer())).toEqual(bytes);
      const [row] = await rows<{ outcome: string }>(
        database().db,
        sql`select outcome::text as outcome from idem_keys where key = ${key}`,
      );
      expect(row?.outcome).toContain('base64');
      expect(row?.outcome).not.toContain('session=');
    });

    it('replayHeaders extends or replaces the allow-list; a 204 replays without a body', async () => {
      const handler = idempotentHandler(
        options({ replayHeaders: [...DEFAULT_REPLAY_HEADERS, 'X-Order-Id'] }),
        () => new Response(null, { status: 204, headers: { 'x-order-id': 'o-1', 'x-other': '1' } }),
      );
      const key = randomUUID();
      await handler(post('/api/orders', '{}', { 'Idempotency-Key': key }));
      const replay = await handler(post('/api/orders', '{}', { 'Idempotency-Key': key }));
      expect(replay.status).toBe(204);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.headers.get('x-order-id')).toBe('o-1');
      expect(replay.headers.get('x-other')).toBeNull();
      expect(replay.body).toBeNull();
    });

    it('error policy: 2xx and deterministic 4xx are stored; 5xx, 401/408/425/429 and plain exceptions release the key', async () => {
      const cases: { answer: () => Response; stored: boolean }[] = [
        { answer: () => Response.json({ ok: true }), stored: true },
        { answer: () => Response.json({ error: 'sold out' }, { status: 409 }), stored: true },
        { answer: () => Response.json({ error: 'declined' }, { status: 402 }), stored: true },
        { answer: () => new Response('no', { status: 404 }), stored: true },
        { answer: () => new Response('slow down', { status: 429 }), stored: false },
        { answer: () => new Response('log in', { status: 401 }), stored: false },
        { answer: () => new Response('upstream down', { status: 503 }), stored: false },
        { answer: () => new Response('bug', { status: 500 }), stored: false },
      ];
      for (const { answer, stored } of cases) {
        let runs = 0;
        const handler = idempotentHandler(options(), () => {
          runs += 1;
          return answer();
        });
        const key = randomUUID();
        const first = await handler(post('/api/pay', '{}', { 'Idempotency-Key': key }));
        const second = await handler(post('/api/pay', '{}', { 'Idempotency-Key': key }));
        expect(second.status).toBe(first.status);
        expect(await second.text()).toBe(await first.text());
        expect(second.headers.get('idempotent-replayed')).toBe(stored ? 'true' : null);
        expect(runs).toBe(stored ? 1 : 2);
      }
    });

    it("thrown errors follow core's rule: a 4xx status is stored as a problem answer, anything else is thrown on and releases", async () => {
      let runs = 0;
      const handler = idempotentHandler(options(), (request) => {
        runs += 1;
        const kind = new URL(request.url).searchParams.get('kind');
        if (kind === 'status') throw Object.assign(new Error('No such product'), { status: 404 });
        throw new Error('connection reset');
      });
      const key = randomUUID();
      const first = await handler(post('/api/pay?kind=status', '{}', { 'Idempotency-Key': key }));
      const again = await handler(post('/api/pay?kind=status', '{}', { 'Idempotency-Key': key }));
      expect(first.status).toBe(404);
      expect(first.headers.get('content-type')).toBe('application/problem+json');
      const firstText = await first.text();
      expect(JSON.parse(firstText)).toMatchObject({ status: 404, detail: 'No such product' });
      expect(firstText).not.toMatch(SQL_OR_STACK);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(await again.text()).toBe(firstText);
      expect(runs).toBe(1);

      const plainKey = randomUUID();
      const plain = () =>
        handler(post('/api/pay?kind=plain', '{}', { 'Idempotency-Key': plainKey }));
      await expect(plain()).rejects.toThrow('connection reset');
      await expect(plain()).rejects.toThrow('connection reset');
      expect(runs).toBe(3);
      const [row] = await rows<{ status: string }>(
        database().db,
        sql`select status from idem_keys where key = ${plainKey}`,
      );
      expect(row?.status).toBe('in_progress'); // released: its lease ended, free for a retry
    });

    it('a streamed body past maxBodyBytes is a 413 as soon as it passes the limit, never a hang; nothing stored', async () => {
      let runs = 0;
      const handler = idempotentHandler(options({ maxBodyBytes: 200_000 }), () => {
        runs += 1;
        return new Response('ok');
      });
      const key = randomUUID();
      /** A text upload under `key`. */
      const upload = (body: BodyInit, init?: RequestInit) =>
        handler(
          post('/api/upload', body, { 'Idempotency-Key': key, 'content-type': 'text/plain' }, init),
        );
      const endless = endlessBody();
      const response = await upload(endless.stream, { duplex: 'half' } as RequestInit);
      expect(response.status).toBe(413);
      expect(await response.json()).toMatchObject({
        code: 'INPUT_TOO_LARGE',
        maxBodyBytes: 200_000,
      });
      expect(endless.chunksSent()).toBeLessThan(10); // read up to the limit, then cancelled
      // A declared length over the limit is refused before reading.
      const declared = await upload('x'.repeat(300_000));
      expect(declared.status).toBe(413);
      expect(runs).toBe(0);
      expect(await storedRows(key)).toBe(0);
      const fits = await upload('x'.repeat(1_000));
      expect(fits.status).toBe(200);
      expect(runs).toBe(1);
    });

    it('an unreadable body (the upload breaks off) is a 400 INVALID_BODY; nothing runs or is stored', async () => {
      const handler = idempotentHandler(options(), () => new Response('ran'));
      const key = randomUUID();
      const broken = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode('{"half":'));
          controller.error(new Error('socket hang up'));
        },
      });
      const response = await handler(
        post('/api/pay', broken, { 'Idempotency-Key': key }, { duplex: 'half' } as RequestInit),
      );
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({ code: 'INVALID_BODY' });
      expect(await storedRows(key)).toBe(0);
    });

    it('a non-JSON body is fingerprinted byte for byte; a JSON body by value (key order aside)', async () => {
      let runs = 0;
      const handler = idempotentHandler(options(), async (request) => {
        runs += 1;
        return new Response(await request.text(), { headers: { 'content-type': 'text/plain' } });
      });
      const key = randomUUID();
      const text = (body: string) =>
        handler(post('/api/notes', body, { 'Idempotency-Key': key, 'content-type': 'text/plain' }));
      expect(await (await text('a b')).text()).toBe('a b');
      expect((await text('a b')).headers.get('idempotent-replayed')).toBe('true');
      expect((await text('a  b')).status).toBe(422);
      expect(runs).toBe(1);
      // The route and the method are part of the key's identity: another route is another key.
      const other = await handler(
        new Request(`${URL_BASE}/api/other`, {
          method: 'PUT',
          headers: { 'Idempotency-Key': key, 'content-type': 'text/plain' },
          body: 'a b',
        }),
      );
      expect(other.headers.get('idempotent-replayed')).toBeNull();
      expect(runs).toBe(2);
    });

    it('key() derives the key from the body (a webhook event id); the header is then ignored', async () => {
      const effects: string[] = [];
      const handler = idempotentHandler(
        options({
          scope: () => 'provider:acme',
          route: '/api/webhooks',
          key: ({ json }) => (json as { id?: string }).id,
        }),
        async (request, { key }) => {
          const event = (await request.json()) as { id: string; amount: number };
          effects.push(event.id);
          return Response.json({ received: event.id, key });
        },
      );
      const eventId = `evt_${randomUUID()}`;
      const deliver = (body: unknown, headers: Record<string, string> = {}) =>
        handler(post('/api/webhooks', JSON.stringify(body), headers));
      const first = await deliver({ id: eventId, amount: 500 }, { 'Idempotency-Key': 'ignored-1' });
      const redelivery = await deliver(
        { amount: 500, id: eventId },
        { 'Idempotency-Key': 'ignored-2' },
      );
      expect(await first.json()).toEqual({ received: eventId, key: eventId });
      expect(redelivery.headers.get('idempotent-replayed')).toBe('true');
      expect(effects).toEqual([eventId]);
      expect(await storedRows(eventId)).toBe(1);
      expect(await storedRows('ignored-1')).toBe(0);

      const bad = await deliver({ id: '', amount: 1 });
      expect(bad.status).toBe(400);
      const problem = await bad.json();
      expect(problem).toMatchObject({ code: 'INVALID_KEY', reason: 'empty' });
      expect(problem.detail).toContain('key() derived');
      // No event id: the header's key, or the 400 for a missing one.
      expect((await deliver({ amount: 1 })).status).toBe(400);
      expect((await deliver({ amount: 1 }, { 'Idempotency-Key': randomUUID() })).status).toBe(200);
    });

    it('required: false runs a request without a key unprotected', async () => {
      let runs = 0;
      const handler = idempotentHandler(
        { ...options(), required: false },
        (_request, idempotency) => {
          runs += 1;
          return Response.json({ protected: idempotency !== undefined });
        },
      );
      expect(await (await handler(post('/api/x', '{}'))).json()).toEqual({ protected: false });
      expect(await (await handler(post('/api/x', '{}'))).json()).toEqual({ protected: false });
      expect(runs).toBe(2);
      const keyed = await handler(post('/api/x', '{}', { 'Idempotency-Key': randomUUID() }));
      expect(await keyed.json()).toEqual({ protected: true });
    });
  });
}

describe('idempotentHandler without a database', () => {
  it('a key() that reads the JSON body finds none in a body sent as text: the 400 says why', async () => {
    const handler = idempotentHandler(
      {
        store: memoryStore(),
        scope: () => 'provider:acme',
        key: ({ json }) => (json as { id?: string } | undefined)?.id,
      },
      () => Response.json({ ok: true }),
    );
    const event = JSON.stringify({ id: `evt_${randomUUID()}` });
    const asText = await handler(post('/api/webhooks', event, { 'content-type': 'text/plain' }));
    expect(asText.status).toBe(400);
    const problem = (await asText.json()) as { code: string; reason: string; detail: string };
    expect(problem).toMatchObject({ code: 'INVALID_KEY', reason: 'missing' });
    expect(problem.detail).toContain('its Content-Type is not JSON');
    expect((await handler(post('/api/webhooks', event))).status).toBe(200);
    // A JSON body without the id: the usual words, nothing about the Content-Type.
    const noId = await handler(post('/api/webhooks', '{}'));
    expect(((await noId.json()) as { detail: string }).detail).not.toContain('Content-Type');
  });

  it('a URL path too long to store in the scope is a 400 that blames the route and quotes only its start', async () => {
    let runs = 0;
    const handler = idempotentHandler({ store: memoryStore(), scope: () => 'user:ann' }, () => {
      runs += 1;
      return Response.json({ ok: true });
    });
    const long = `/api/items/${'a'.repeat(3_000)}`;
    const answer = await handler(post(long, '{}', { 'Idempotency-Key': randomUUID() }));
    expect(answer.status).toBe(400);
    const { detail } = (await answer.json()) as { detail: string };
    expect(detail).toContain('The route "POST /api/items/aaa');
    expect(detail).toContain('Send it to a shorter URL');
    expect(detail).not.toContain('principal');
    expect(detail.length).toBeLessThan(400);
    expect(runs).toBe(0);
    // A long principal is still the principal's fault.
    const named = idempotentHandler({ store: memoryStore(), scope: () => 'u'.repeat(3_000) }, () =>
      Response.json({ ok: true }),
    );
    const refused = await named(post('/api/x', '{}', { 'Idempotency-Key': randomUUID() }));
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { detail: string }).detail).toContain('The principal');
  });

  it('an attempt that lost its lease answers 409 LEASE_LOST with Retry-After: 0', async () => {
    const store = losingLeaseAt('complete', memoryStore());
    const handler = idempotentHandler({ store, scope: () => 'ann' }, () => new Response('late'));
    const response = await handler(post('/api/pay', '{}', { 'Idempotency-Key': 'k-1' }));
    expect(response.status).toBe(409);
    expect(response.headers.get('retry-after')).toBe('0');
    expect(response.headers.get('idempotency-status')).toBe('lease-lost');
    expect(await response.json()).toMatchObject({ code: 'LEASE_LOST', retryAfterMs: 0 });
  });

  it('a handler that fails because its lease was lost (an AbortError) answers 409 LEASE_LOST, not its error', async () => {
    const clock = manualClock();
    const store = losingLeaseAt('heartbeat', memoryStore({ clock }));
    let waiting = () => {};
    const started = new Promise<void>((resolve) => (waiting = resolve));
    const handler = idempotentHandler(
      { store, clock, leaseMs: 3_000, scope: () => 'ann' },
      (_request, { signal }) =>
        new Promise<Response>((_resolve, reject) => {
          signal.addEventListener('abort', () =>
            reject(new DOMException('This operation was aborted', 'AbortError')),
          );
          waiting();
        }),
    );
    const answer = handler(post('/api/pay', '{}', { 'Idempotency-Key': 'k-2' }));
    await started;
    clock.advance(1_000); // the heartbeat finds the lease gone and aborts the signal
    const response = await answer;
    expect(response.status).toBe(409);
    expect(await response.json()).toMatchObject({ code: 'LEASE_LOST' });
  });

  it('a recovery point whose save finds the key taken over answers 409 LEASE_LOST', async () => {
    const store = losingLeaseAt('saveStep', memoryStore());
    const handler = idempotentHandler({ store, scope: () => 'ann' }, async (_request, { step }) => {
      await step('charge', () => ({ chargeId: 'ch_1' }));
      return new Response('charged');
    });
    const response = await handler(post('/api/pay', '{}', { 'Idempotency-Key': 'k-3' }));
    expect(response.status).toBe(409);
    expect(response.headers.get('idempotency-status')).toBe('lease-lost');
  });

  it('options that cannot work throw ConfigurationError at start-up', () => {
    const store = memoryStore();
    const ok = () => new Response('ok');
    for (const options of [
      { store } as never,
      { store, db: {} as never, scope: () => 'a' },
      { scope: () => 'a' },
      { store, scope: () => 'a', maxBodyBytes: 0 },
      { store, scope: () => 'a', leaseMs: 1_000, ttlMs: 500 },
    ]) {
      let caught: unknown;
      try {
        idempotentHandler(options, ok);
      } catch (error) {
        caught = error;
      }
      expect(isConfigurationError(caught)).toBe(true);
    }
  });

  it('@idem/server/fetch imports no tRPC, at any depth', () => {
    const srcDir = resolve(dirname(fileURLToPath(import.meta.url)), '../src');
    const seen = new Set<string>();
    const external = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      const text = readFileSync(file, 'utf8');
      for (const [, specifier] of text.matchAll(/^(?:import|export)[^;]*?from '([^']+)'/gms)) {
        if (specifier === undefined) continue; // the group takes part in every match
        if (specifier.startsWith('.')) {
          visit(resolve(dirname(file), specifier.replace(/\.js$/, '.ts')));
        } else {
          external.add(specifier);
        }
      }
    };
    visit(resolve(srcDir, 'fetch/index.ts'));
    expect(seen.size).toBeGreaterThan(4);
    expect([...external].filter((name) => name.includes('trpc'))).toEqual([]);
  });
});
