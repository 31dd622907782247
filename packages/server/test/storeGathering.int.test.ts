import { isLeaseLostError } from '@idem/core';
import type { ClaimRequest, ClaimResult } from '@idem/core/store';
import { leaseTokenOf } from '@idem/core/store';
import { manualClock } from '@idem/core/testing';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createDrizzleStore } from '../src/postgres/drizzleStore.js';
import type { FirstStatement } from '../src/postgres/storeClaim.js';
import { anotherClient, driverBackends, useDatabase } from './harness.js';

const request = (key: string, fingerprint = 'fp-a'): ClaimRequest => ({
  scope: 'user:1/orders.create',
  key,
  fingerprint,
  leaseMs: 30_000,
  ttlMs: 60_000,
});

/** What a claim answered, in short: its status and, for a replay, the stored value. */
const answer = (result: ClaimResult) =>
  result.status === 'replay' && result.record.outcome?.kind === 'success'
    ? `replay ${JSON.stringify(result.record.outcome.value)}`
    : result.status;

/**
 * The statements heard, by kind: `read`, `insert` and `update` alone, `readMany`,
 * `insertMany` and `completeMany` (several calls in one), `claim` (the full claim).
 */
const kinds = (heard: readonly string[]) => {
  const counts: Record<string, number> = {};
  for (const query of heard) {
    const verb = /^\w+/.exec(query)?.[0] ?? query;
    const kind = query.includes('unnest(')
      ? { select: 'readMany', insert: 'insertMany', update: 'completeMany' }[verb]
      : { select: 'read', insert: 'insert', update: 'update', with: 'claim' }[verb];
    const name = kind ?? verb;
    counts[name] = (counts[name] ?? 0) + 1;
  }
  return counts;
};

/** A value whose JSON holds what an array literal must quote: quotes, braces, commas, NULL. */
const awkward = (index: number) => ({ order: index, note: `a "b" \\ {c}, NULL\n\u00e9 ${index}` });

for (const backend of driverBackends) {
  describe(`a store's calls asked for in one turn, on ${backend}`, () => {
    const database = useDatabase(backend);

    /**
     * A store whose every claim starts with `first` (a read, as a burst of retries makes it;
     * the INSERT, as new keys do), on a client whose statements are heard, with `completed`
     * keys stored, each with its own value. `heard()` counts the statements by kind since the
     * last `heardNothing()`, which the store starts with.
     */
    const storeWith = async (
      completed: number,
      {
        first = 'read',
        clock = manualClock(Date.UTC(2026, 0, 1)),
      }: { first?: FirstStatement; clock?: ReturnType<typeof manualClock> } = {},
    ) => {
      await database().truncate();
      const queries: string[] = [];
      const client = anotherClient(database(), {
        max: 4,
        logger: { logQuery: (query) => queries.push(query) },
      });
      onTestFinished(client.close);
      const store = createDrizzleStore(client.db, { clock }, false, first);
      for (let index = 0; index < completed; index++) {
        const claimed = await store.claim(request(`done-${index}`));
        if (claimed.status !== 'claimed') throw new Error(`done-${index}: ${claimed.status}`);
        await store.complete(
          leaseTokenOf(claimed.record),
          { kind: 'success', value: { order: index } },
          60_000,
        );
      }
      const heardNothing = () => {
        queries.length = 0;
      };
      heardNothing();
      return { store, clock, heard: () => kinds(queries), heardNothing };
    };

    it('answers every claim of a burst of retries as a claim alone would, from one read', async () => {
      const { store, heard, heardNothing } = await storeWith(12);
      const held = await store.claim(request('held'));
      expect(held.status).toBe('claimed');
      heardNothing();
      const burst = [
        ...Array.from({ length: 12 }, (_, index) => request(`done-${index}`)),
        request('done-3'),
        request('done-5', 'fp-b'),
        request('held'),
        request('new-0'),
        request('new-1'),
      ];
      const answers = (await Promise.all(burst.map((each) => store.claim(each)))).map(answer);
      expect(answers).toEqual([
        ...Array.from({ length: 12 }, (_, index) => `replay {"order":${index}}`),
        'replay {"order":3}',
        'mismatch',
        'in_progress',
        'claimed',
        'claimed',
      ]);
      // One statement read all 17 keys; the two it did not find were then claimed in full.
      expect(heard()).toEqual({ readMany: 1, claim: 2 });
      // The same claims one at a time answer the same (the new keys now held).
      const alone: string[] = [];
      for (const each of burst) alone.push(answer(await store.claim(each)));
      expect(alone).toEqual([...answers.slice(0, 15), 'in_progress', 'in_progress']);
    });

    it('claims a burst of new keys with one INSERT and completes them with one UPDATE', async () => {
      const { store, heard, heardNothing } = await storeWith(1, { first: 'insert' });
      const burst = [
        ...Array.from({ length: 10 }, (_, index) => request(`new-${index}`)),
        request('new-4'),
        request('done-0'),
      ];
      const claims = await Promise.all(burst.map((each) => store.claim(each)));
      expect(claims.map(answer)).toEqual([
        ...Array.from({ length: 10 }, () => 'claimed'),
        'in_progress',
        'replay {"order":0}',
      ]);
      // The key asked for twice and the completed key were not inserted: read, together.
      expect(heard()).toEqual({ insertMany: 1, readMany: 1 });
      heardNothing();
      const tokens = claims.slice(0, 10).map((claim) => leaseTokenOf(claim.record));
      // One token of an incarnation that never held its key: fenced out, alone of its burst.
      const stale = { ...(tokens[9] as (typeof tokens)[number]), version: 2 };
      const completions = await Promise.allSettled([
        ...tokens.map((token, index) =>
          store.complete(token, { kind: 'success', value: awkward(index) }, 60_000),
        ),
        store.complete(stale, { kind: 'success', value: awkward(99) }, 60_000),
      ]);
      expect(completions.slice(0, 10).map((each) => each.status)).toEqual(
        Array.from({ length: 10 }, () => 'fulfilled'),
      );
      const refused = completions[10];
      expect(refused?.status === 'rejected' && isLeaseLostError(refused.reason)).toBe(true);
      expect(heard()).toEqual({ completeMany: 1 });
      for (let index = 0; index < 10; index++) {
        const replay = await store.claim(request(`new-${index}`));
        expect(replay.status).toBe('replay');
        expect(replay.record.outcome).toEqual({ kind: 'success', value: awkward(index) });
      }
    });

    it('sends each call again alone when their statement is refused: only the bad one fails', async () => {
      const { store, heard } = await storeWith(2);
      const reads = await Promise.allSettled([
        store.claim(request('done-0')),
        store.claim(request('bad\u0000key')),
        store.claim(request('done-1')),
      ]);
      expect(reads.map((each) => each.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      expect(
        reads.flatMap((each) => (each.status === 'fulfilled' ? [answer(each.value)] : [])),
      ).toEqual(['replay {"order":0}', 'replay {"order":1}']);
      expect(heard()).toEqual({ readMany: 1, read: 3 });
      const inserting = await storeWith(0, { first: 'insert' });
      const inserts = await Promise.allSettled([
        inserting.store.claim(request('new-0')),
        inserting.store.claim(request('bad\u0000key')),
        inserting.store.claim(request('new-1')),
      ]);
      expect(inserts.map((each) => each.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      expect(
        inserts.flatMap((each) => (each.status === 'fulfilled' ? [answer(each.value)] : [])),
      ).toEqual(['claimed', 'claimed']);
      expect(inserting.heard()).toEqual({ insertMany: 1, insert: 3 });
    });

    it('puts together only the calls that bind one "now"', async () => {
      // Stored at the clock's start, to expire 60 s later; claimed in one turn just before and
      // just at that instant, the key replays for the first claim and is expired for the second.
      const { store, clock, heard } = await storeWith(1);
      clock.advance(59_999);
      const before = store.claim(request('done-0'));
      clock.advance(1);
      const at = store.claim(request('done-0'));
      expect(answer(await before)).toBe('replay {"order":0}');
      expect(answer(await at)).toBe('claimed');
      expect(heard()).toMatchObject({ read: 2 });
      expect(heard().readMany).toBeUndefined();
    });
  });
}
