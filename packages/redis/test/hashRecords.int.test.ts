import { manualClock } from '@idem/core/testing';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { recordKey } from '../src/recordKey.js';
import { startRedisServer } from '../src/testing/index.js';
import { freshStore, request, useRedis } from './redisFixtures.js';

/**
 * Records that @idem/redis 0.1 stored as a Redis hash (one field per column, `step:<name>`
 * per recovery point) are read as they were, taken over and completed, and written back in
 * the store's layout: a deployment that upgrades keeps its keys in flight.
 */
describe('redisStore on records an earlier version stored as a hash', () => {
  const redis = useRedis(
    () => startRedisServer(),
    (server) => createClient({ url: server.url }).connect(),
  );
  const START = Date.UTC(2026, 0, 1);
  // Characters JSON escapes, one it does not (/), and one outside ASCII.
  const FINGERPRINT = 'fp "quoted" \\ back\nline\ttab / é \u0001';
  const OUTCOME = { kind: 'success', value: { orderId: 7, note: 'ünïcode "q"' } };

  /** Writes the hash 0.1 wrote for `key` under a fresh store; the store and the Redis key. */
  async function withHashRecord(key: string, fields: Record<string, string>) {
    const clock = manualClock(START);
    const { store, keyPrefix } = freshStore(redis().client, { clock });
    const redisKey = recordKey(keyPrefix, request().scope, key);
    await redis().client.sendCommand(['HSET', redisKey, ...Object.entries(fields).flat()]);
    const typeOf = async () => String(await redis().client.sendCommand(['TYPE', redisKey]));
    return { store, clock, typeOf };
  }

  /** The fields 0.1 kept for a record in progress at `version` (as many attempts). */
  const inProgressHash = (
    fingerprint: string,
    version: number,
    at: { lockedUntil: number; createdAt: number },
  ) => ({
    fingerprint,
    status: 'in_progress',
    version: String(version),
    attempts: String(version),
    locked_until: String(at.lockedUntil),
    created_at: String(at.createdAt),
    expires_at: String(START + 86_400_000),
  });

  it('replays a completed hash record and tells a mismatch, without writing it', async () => {
    const { store, typeOf } = await withHashRecord('done', {
      fingerprint: FINGERPRINT,
      status: 'completed',
      version: '1',
      attempts: '1',
      outcome: JSON.stringify(OUTCOME),
      created_at: String(START - 1_000),
      completed_at: String(START - 500),
      expires_at: String(START + 86_400_000),
    });
    const replay = await store.claim(request({ key: 'done', fingerprint: FINGERPRINT }));
    expect(replay).toMatchObject({
      status: 'replay',
      record: {
        fingerprint: FINGERPRINT,
        status: 'completed',
        version: 1,
        lockedUntil: null,
        outcome: OUTCOME,
        createdAt: START - 1_000,
        completedAt: START - 500,
      },
    });
    expect(await store.claim(request({ key: 'done', fingerprint: 'other' }))).toMatchObject({
      status: 'mismatch',
    });
    expect((await store.get(request().scope, 'done'))?.outcome).toEqual(OUTCOME);
    expect(await typeOf()).toBe('hash');
  });

  it('takes over an in-progress hash record with its steps, then completes it as a string', async () => {
    const steps = { charge: { id: 'ch_1' }, 'we"ird\nname': [1, 'two'], ['__proto__']: null };
    const { store, clock, typeOf } = await withHashRecord('stalled', {
      ...inProgressHash(FINGERPRINT, 3, { lockedUntil: START + 1_000, createdAt: START - 2_000 }),
      ...Object.fromEntries(
        Object.entries(steps).map(([name, value]) => [`step:${name}`, JSON.stringify(value)]),
      ),
    });
    const busy = await store.claim(request({ key: 'stalled', fingerprint: FINGERPRINT }));
    expect(busy).toMatchObject({ status: 'in_progress', record: { version: 3 } });
    clock.advance(1_000);
    const taken = await store.claim(request({ key: 'stalled', fingerprint: FINGERPRINT }));
    if (taken.status !== 'claimed') throw new Error(`expected a takeover, got ${taken.status}`);
    expect(taken).toMatchObject({ takeover: true, record: { version: 4, attempts: 4 } });
    expect(taken.record.steps).toEqual(steps);
    expect(Object.keys(taken.record.steps)).toContain('__proto__');
    expect(await typeOf()).toBe('string');

    await store.saveStep(taken.record, 'ship', { carrier: 'ups' });
    await store.complete(taken.record, { kind: 'success', value: 'shipped' }, 60_000);
    const record = await store.get(request().scope, 'stalled');
    expect(record).toMatchObject({
      status: 'completed',
      version: 4,
      createdAt: START - 2_000,
      outcome: { kind: 'success', value: 'shipped' },
    });
    expect(record?.steps).toEqual({ ...steps, ship: { carrier: 'ups' } });
  });

  it("fences writes by the hash record's own version and creation time", async () => {
    const { store } = await withHashRecord(
      'held',
      inProgressHash('fp', 2, { lockedUntil: START + 30_000, createdAt: START - 100 }),
    );
    const token = { scope: request().scope, key: 'held', version: 2, createdAt: START - 100 };
    await expect(store.heartbeat({ ...token, version: 1 }, 10_000)).rejects.toThrow(/lease/i);
    await expect(store.heartbeat({ ...token, createdAt: START }, 10_000)).rejects.toThrow(/lease/i);
    await store.heartbeat(token, 60_000);
    expect(await store.get(token.scope, 'held')).toMatchObject({
      status: 'in_progress',
      version: 2,
      lockedUntil: START + 60_000,
    });
  });
});
