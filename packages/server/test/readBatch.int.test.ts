import type { ClaimRequest, ClaimResult } from '@idem/core/store';
import { leaseTokenOf } from '@idem/core/store';
import { manualClock } from '@idem/core/testing';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createDrizzleStore } from '../src/postgres/drizzleStore.js';
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

for (const backend of driverBackends) {
  describe(`a store's reads asked for in one turn, on ${backend}`, () => {
    const database = useDatabase(backend);

    /**
     * A store whose every claim starts with a read (as a burst of retries makes it), on a
     * client whose statements are heard, with `completed` keys stored, each with its own value
     * (`reads` counts the reads heard since the last `heardNothing`, which the store starts with).
     */
    const storeWith = async (completed: number, clock = manualClock(Date.UTC(2026, 0, 1))) => {
      await database().truncate();
      const heard: string[] = [];
      const client = anotherClient(database(), {
        max: 4,
        logger: { logQuery: (query) => heard.push(query) },
      });
      onTestFinished(client.close);
      const store = createDrizzleStore(client.db, { clock }, false, 'read');
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
        heard.length = 0;
      };
      heardNothing();
      const reads = () => ({
        together: heard.filter((query) => query.includes('unnest(')).length,
        alone: heard.filter((query) => query.startsWith('select') && !query.includes('unnest('))
          .length,
      });
      return { store, clock, reads, heardNothing };
    };

    it('answers every claim of a burst as a claim alone would, from one statement', async () => {
      const { store, reads, heardNothing } = await storeWith(12);
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
      // One statement read all 17 keys; the two it did not find were then claimed.
      expect(reads()).toEqual({ together: 1, alone: 0 });
      // The same claims one at a time answer the same (the new keys now held).
      const alone: string[] = [];
      for (const each of burst) alone.push(answer(await store.claim(each)));
      expect(alone).toEqual([...answers.slice(0, 15), 'in_progress', 'in_progress']);
    });

    it('sends each read again alone when their statement fails: a refused key fails only its claim', async () => {
      const { store, reads } = await storeWith(2);
      const settled = await Promise.allSettled([
        store.claim(request('done-0')),
        store.claim(request('bad\u0000key')),
        store.claim(request('done-1')),
      ]);
      expect(settled.map((each) => each.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      expect(
        settled.flatMap((each) => (each.status === 'fulfilled' ? [answer(each.value)] : [])),
      ).toEqual(['replay {"order":0}', 'replay {"order":1}']);
      expect(reads()).toEqual({ together: 1, alone: 3 });
    });

    it('reads together only the claims that bind one "now"', async () => {
      // Stored at the clock's start, to expire 60 s later; claimed in one turn just before and
      // just at that instant, the key replays for the first claim and is expired for the second.
      const { store, clock, reads } = await storeWith(1);
      clock.advance(59_999);
      const before = store.claim(request('done-0'));
      clock.advance(1);
      const at = store.claim(request('done-0'));
      expect(answer(await before)).toBe('replay {"order":0}');
      expect(answer(await at)).toBe('claimed');
      expect(reads()).toEqual({ together: 0, alone: 2 });
    });
  });
}
