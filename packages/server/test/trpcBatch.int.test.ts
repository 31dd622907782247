import { randomUUID } from 'node:crypto';
import { TRPCClientError } from '@trpc/client';
import { describe, expect, it } from 'vitest';
import { useTestApp } from './fixtures/testApp.js';
import { backends } from './harness.js';
import { batchClient, idempotencyData, mutateBatch } from './httpClient.js';

for (const backend of backends) {
  describe(`idempotent() in batches (httpBatchLink, Idempotency-Key-Batch) on ${backend}`, () => {
    const app = useTestApp(backend);

    it('gives every operation of a batch its own key, and replays each by batch index', async () => {
      const { client, responses } = batchClient(app().url);
      const tags = [randomUUID(), randomUUID(), randomUUID()] as const;
      const keys = [randomUUID(), randomUUID(), randomUUID()] as const;
      const send = (order: readonly [string, string, string]) =>
        Promise.all([
          client.echo.mutate(
            { tag: tags[0] },
            { context: { idempotencyKey: order[0], user: 'alice' } },
          ),
          client.txOrder.mutate(
            { tag: tags[1], sku: 'book' },
            { context: { idempotencyKey: order[1], user: 'alice' } },
          ),
          client.echo.mutate(
            { tag: tags[2] },
            { context: { idempotencyKey: order[2], user: 'alice' } },
          ),
        ]);

      const first = await send(keys);
      expect(responses).toHaveLength(1); // one HTTP request for the three mutations
      expect(responses[0]?.get('idempotent-replayed-batch')).toBeNull();
      const again = await send(keys);
      expect(again).toEqual(first);
      expect(responses[1]?.get('idempotent-replayed-batch')).toBe('[0,1,2]');
      for (const tag of tags) expect(app().executionsOf(tag)).toBe(1);

      // A new key at index 1 runs again; the others replay.
      const mixed = await send([keys[0], randomUUID(), keys[2]]);
      expect(responses[2]?.get('idempotent-replayed-batch')).toBe('[0,2]');
      expect(mixed[0]).toEqual(first[0]);
      expect(mixed[1].execution).toBe(2);
      expect(app().executionsOf(tags[1])).toBe(2);
    });

    it('matches keys by index: an operation without a key fails alone, queries need none', async () => {
      const { client } = batchClient(app().url);
      const tag = randomUUID();
      const [keyed, unkeyed, query] = await Promise.allSettled([
        client.echo.mutate({ tag }, { context: { idempotencyKey: randomUUID() } }),
        client.echo.mutate({ tag }, { context: {} }),
        client.plainQuery.query(),
      ]);
      expect(keyed.status).toBe('fulfilled');
      expect(unkeyed.status).toBe('rejected');
      const error = (unkeyed as PromiseRejectedResult).reason as TRPCClientError<never>;
      expect(error).toBeInstanceOf(TRPCClientError);
      expect(error.data).toMatchObject({
        code: 'BAD_REQUEST',
        idempotency: idempotencyData('INVALID_KEY', { reason: 'missing' }),
      });
      expect(query).toEqual({ status: 'fulfilled', value: 'ok' });
      expect(app().executionsOf(tag)).toBe(1);
    });

    it('reports a busy key per operation: 207 with Idempotency-Status-Batch and Retry-After', async () => {
      const busyKey = randomUUID();
      const busyTag = randomUUID();
      const holder = mutateBatch(app().url, [{ path: 'gated', input: { tag: busyTag } }], {
        'Idempotency-Key-Batch': JSON.stringify({ 0: busyKey }),
      });
      await app().gates.arrived(busyTag);

      const freeTag = randomUUID();
      const batch = await mutateBatch(
        app().url,
        [
          { path: 'echo', input: { tag: freeTag } },
          { path: 'gated', input: { tag: busyTag } },
        ],
        { 'Idempotency-Key-Batch': JSON.stringify({ 0: randomUUID(), 1: busyKey }) },
      );
      expect(batch.status).toBe(207);
      expect(batch.results[0]?.data).toMatchObject({ tag: freeTag, execution: 1 });
      expect(batch.results[1]?.error?.data).toMatchObject({
        code: 'CONFLICT',
        idempotency: idempotencyData('REQUEST_IN_PROGRESS'),
      });
      expect(batch.headers.get('idempotency-status-batch')).toBe('{"1":"in-progress"}');
      expect(Number(batch.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(batch.headers.get('idempotency-status')).toBeNull();

      app().gates.open(busyTag);
      expect((await holder).results[0]?.data).toMatchObject({ tag: busyTag });
      expect(app().executionsOf(busyTag)).toBe(1);
    });
  });
}
