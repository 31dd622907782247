import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { until } from './fixtures/deferred.js';
import { useTestApp } from './fixtures/testApp.js';
import { backends, rows } from './harness.js';
import { idempotencyData, mutate, type RawResponse, singleClient } from './httpClient.js';

for (const backend of backends) {
  describe(`idempotent() in lease mode over HTTP on ${backend}`, () => {
    const app = useTestApp(backend);
    const keyed = (key: string, user = 'alice') => ({ 'Idempotency-Key': key, 'x-user': user });
    /** `replay` is `original` again, status and body, marked replayed; `tag` ran once. */
    const expectReplayOf = (replay: RawResponse, original: RawResponse, tag: string) => {
      expect(replay.status).toBe(original.status);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.text).toBe(original.text);
      expect(app().executionsOf(tag)).toBe(1);
    };

    it('round-trips Date, BigInt and Map exactly through superjson on replay', async () => {
      const client = singleClient(app().url);
      const key = randomUUID();
      const tag = randomUUID();
      const payload = {
        when: new Date(Date.UTC(2030, 5, 7, 8, 9, 10, 11)),
        amount: 123456789012345678901234567890n,
        lines: new Map<string, unknown>([
          ['a', { qty: 2, at: new Date(0) }],
          ['b', new Set([1n, 2n])],
        ]),
        nothing: undefined,
      };
      const context = { context: { idempotencyKey: key, user: 'alice' } };
      const first = await client.echo.mutate({ tag, payload }, context);
      const replay = await client.echo.mutate({ tag, payload }, context);
      expect(replay).toEqual(first);
      expect(replay.at).toBeInstanceOf(Date);
      expect(replay.at.getTime()).toBe(first.at.getTime());
      expect(typeof replay.big).toBe('bigint');
      expect(replay.big).toBe(2n ** 70n + 1n);
      expect(replay.map).toBeInstanceOf(Map);
      expect([...replay.map]).toEqual([...first.map]);
      const replayedPayload = replay.payload as typeof payload;
      expect(replayedPayload.amount).toBe(payload.amount);
      expect(replayedPayload.lines.get('b')).toEqual(new Set([1n, 2n]));
      expect('nothing' in replayedPayload).toBe(true);
      expect(app().executionsOf(tag)).toBe(1);
    });

    // A key is bound to its procedure and its input: `first`, then `second` under one key.
    it.each([
      {
        what: 'answers the same key with another input with 422 KEY_MISMATCH, running nothing',
        first: { path: 'echo', input: { payload: 1 } },
        second: { path: 'echo', input: { payload: 2 } },
        status: 422,
        code: 'UNPROCESSABLE_CONTENT',
        idempotency: idempotencyData('KEY_MISMATCH'),
        executions: 1,
      },
      {
        what: 'keeps a key per procedure: the same key on another procedure is another call',
        first: { path: 'echo', input: { failures: 0 } },
        second: { path: 'flaky', input: { failures: 0 } },
        status: 200,
        executions: 2,
      },
    ])('$what', async ({ first, second, status, code, idempotency, executions }) => {
      const key = randomUUID();
      const tag = randomUUID();
      await mutate(app().url, first.path, { tag, ...first.input }, keyed(key));
      const other = await mutate(app().url, second.path, { tag, ...second.input }, keyed(key));
      expect(other.status).toBe(status);
      expect(other.error?.data.code).toBe(code);
      expect(other.error?.data.idempotency).toEqual(idempotency);
      expect(app().executionsOf(tag)).toBe(executions);
    });

    it('answers a concurrent duplicate with 409, Retry-After and data that tell it apart', async () => {
      const key = randomUUID();
      const tag = randomUUID();
      const first = mutate(app().url, 'gated', { tag }, keyed(key));
      await app().gates.arrived(tag);
      const duplicate = await mutate(app().url, 'gated', { tag }, keyed(key));
      expect(duplicate.status).toBe(409);
      expect(duplicate.error?.data.code).toBe('CONFLICT');
      expect(duplicate.error?.data.idempotency?.code).toBe('REQUEST_IN_PROGRESS');
      const retryAfterMs = duplicate.error?.data.idempotency?.retryAfterMs ?? 0;
      expect(retryAfterMs).toBeGreaterThan(0);
      expect(retryAfterMs).toBeLessThanOrEqual(30_000);
      expect(duplicate.headers.get('retry-after')).toBe(String(Math.ceil(retryAfterMs / 1000)));
      expect(duplicate.headers.get('idempotency-status')).toBe('in-progress');

      // The procedure's own CONFLICT carries neither.
      const business = await mutate(app().url, 'businessConflict', { tag }, keyed(randomUUID()));
      expect(business.status).toBe(409);
      expect(business.error?.data.idempotency).toBeUndefined();
      expect(business.headers.get('idempotency-status')).toBeNull();
      expect(business.headers.get('retry-after')).toBeNull();

      app().gates.open(tag);
      const original = await first;
      expect(original.status).toBe(200);
      const retry = await mutate(app().url, 'gated', { tag }, keyed(key));
      expect(retry.text).toBe(original.text);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(app().executionsOf(tag)).toBe(2); // the first run and businessConflict's
    });

    it('with inProgress { waitMs }, a duplicate waits for the first call and replays it', async () => {
      const key = randomUUID();
      const tag = randomUUID();
      const first = mutate(app().url, 'gatedWait', { tag }, keyed(key));
      await app().gates.arrived(tag);
      const duplicate = mutate(app().url, 'gatedWait', { tag }, keyed(key));
      // The duplicate has claimed and been told "in progress" at least once: it is waiting.
      await until(() => (app().claims.get(key) ?? 0) >= 3, { what: 'the duplicate to poll' });
      app().gates.open(tag);
      const [original, replay] = await Promise.all([first, duplicate]);
      expect(original.status).toBe(200);
      expectReplayOf(replay, original, tag);
    });

    it('stores a deterministic error and replays it with the same code, message and data', async () => {
      const key = randomUUID();
      const tag = randomUUID();
      const first = await mutate(app().url, 'declined', { tag }, keyed(key));
      expect(first.status).toBe(402);
      expect(first.error?.message).toBe('The card was declined');
      expect(first.error?.data.code).toBe('PAYMENT_REQUIRED');
      expect(first.error?.data.declineCode).toBe('insufficient_funds');
      expectReplayOf(await mutate(app().url, 'declined', { tag }, keyed(key)), first, tag);
    });

    it('releases the key on a transient failure: the retry runs again, resuming finished steps', async () => {
      const key = randomUUID();
      const tag = randomUUID();
      const failed = await mutate(app().url, 'flaky', { tag, failures: 1 }, keyed(key));
      expect(failed.status).toBe(500);
      expect(failed.error?.data.code).toBe('INTERNAL_SERVER_ERROR');
      expect(failed.headers.get('idempotent-replayed')).toBeNull();
      const retried = await mutate(app().url, 'flaky', { tag, failures: 1 }, keyed(key));
      expect(retried.status).toBe(200);
      expect(retried.data).toEqual({
        execution: 2,
        charged: { chargedIn: 1 }, // the step of the failed attempt, not run again
        attempt: 2,
        takeover: true,
      });
      const replay = await mutate(app().url, 'flaky', { tag, failures: 1 }, keyed(key));
      expect(replay.text).toBe(retried.text);
      expect(app().executionsOf(tag)).toBe(2);
    });

    it("runs user B's call with user A's key as B's own: A's response never leaks", async () => {
      const key = randomUUID();
      const tag = randomUUID();
      const input = { tag, payload: 'same input' };
      const alice = await mutate(app().url, 'echo', input, keyed(key, 'alice'));
      const bob = await mutate(app().url, 'echo', input, keyed(key, 'bob'));
      expect(bob.status).toBe(200);
      expect(bob.headers.get('idempotent-replayed')).toBeNull();
      expect(bob.data).toMatchObject({ user: 'bob', execution: 2 });
      expect(bob.text).not.toContain('alice');
      const bobAgain = await mutate(app().url, 'echo', input, keyed(key, 'bob'));
      expect(bobAgain.text).toBe(bob.text);
      const aliceAgain = await mutate(app().url, 'echo', input, keyed(key, 'alice'));
      expect(aliceAgain.text).toBe(alice.text);
      expect(app().executionsOf(tag)).toBe(2);
      const scopes = await rows<{ scope: string }>(
        app().db,
        sql`select scope from idem_keys where key = ${key} order by scope`,
      );
      expect(scopes.map((row) => row.scope)).toEqual(['user:alice/echo', 'user:bob/echo']);
    });

    for (const useStep of [true, false]) {
      it(`a paused handler that resumes after a takeover gets LeaseLostError and writes nothing (${useStep ? 'at its next step' : 'at completion'})`, async () => {
        const key = randomUUID();
        const tag = randomUUID();
        const { clock, gates } = app();
        const zombie = mutate(app().url, 'zombie', { tag, useStep }, keyed(key));
        await gates.arrived(tag);
        clock.pause(); // no more heartbeats: the lease (300 ms) runs out in the database
        const takeover = await until(
          async () => {
            const response = await mutate(app().url, 'zombie', { tag, useStep }, keyed(key));
            return response.status === 409 ? undefined : response;
          },
          { what: 'another attempt to take the key over', intervalMs: 25 },
        );
        expect(takeover.status).toBe(200);
        // Attempt 2, unless a busy machine held that attempt past its own 300 ms lease: its
        // write was then refused (409) and a later poll took the key over again.
        const { attempt } = takeover.data as { attempt: number };
        expect(attempt).toBeGreaterThanOrEqual(2);

        clock.resume();
        gates.open(tag);
        const lost = await zombie;
        expect(lost.status).toBe(409);
        expect(lost.error?.data.idempotency?.code).toBe('LEASE_LOST');
        expect(lost.headers.get('idempotency-status')).toBe('lease-lost');
        // The zombie (attempt 1) wrote nothing; the attempt that kept the key ran its step.
        const effects = app().sideEffects.filter((effect) => effect.tag === tag);
        expect(effects.some((effect) => effect.attempt === 1)).toBe(false);
        expect(effects.some((effect) => effect.attempt === attempt)).toBe(useStep);
        // The record keeps the outcome of the attempt that owned the key.
        const replay = await mutate(app().url, 'zombie', { tag, useStep }, keyed(key));
        expect(replay.text).toBe(takeover.text);
        expect(app().events.some((event) => event.key === key && event.type === 'lease_lost')).toBe(
          true,
        );
      });
    }
  });
}
