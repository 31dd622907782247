import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { freezable, settle } from '../test/engineFixtures.js';
import { createIdempotency, wasReplayed } from './createIdempotency.js';
import { isIdempotencyError } from './errors/IdempotencyError.js';
import { isRequestInProgressError } from './errors/RequestInProgressError.js';
import type { IdempotencyEvent } from './IdempotencyOptions.js';
import { manualClock } from './testing/manualClock.js';
import { memoryStore } from './testing/memoryStore.js';

/**
 * Model-based test of the engine on the memory store: random sequences of requests,
 * concurrent duplicates, crashes, process restarts and clock jumps, checked against a
 * reference model of one key's life: between two fresh claims of a key (an "epoch") its
 * effect happens at most once, at most one attempt completes, and every replay equals
 * the outcome that attempt stored.
 */

const LEASE_MS = 1_000;
const TTL_MS = 10_000;
const KEYS = ['k-a', 'k-b', 'k-c'] as const;
type Key = (typeof KEYS)[number];

type Behaviour =
  | 'ok'
  | 'decline'
  | 'transient'
  | 'crash-before-effect'
  | 'crash-after-effect'
  | 'slow';
type Command =
  | { type: 'execute'; key: Key; variant: number; behaviour: Behaviour }
  | { type: 'duplicates'; key: Key; count: number }
  | { type: 'advance'; ms: number }
  | { type: 'resume' }
  | { type: 'restart' };

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      type: fc.constant('execute' as const),
      key: fc.constantFrom(...KEYS),
      variant: fc.integer({ min: 0, max: 3 }).map((value) => (value === 3 ? 1 : 0)),
      behaviour: fc.constantFrom<Behaviour>(
        'ok',
        'ok',
        'decline',
        'transient',
        'crash-before-effect',
        'crash-after-effect',
        'slow',
      ),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      type: fc.constant('duplicates' as const),
      key: fc.constantFrom(...KEYS),
      count: fc.integer({ min: 2, max: 4 }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      type: fc.constant('advance' as const),
      ms: fc.constantFrom(10, LEASE_MS / 2, LEASE_MS, LEASE_MS * 2, TTL_MS + 1),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ type: 'resume' as const }) },
  { weight: 1, arbitrary: fc.constant({ type: 'restart' as const }) },
);

type Resolution =
  | { key: string; replayed: boolean; ok: true; value: unknown }
  | {
      key: string;
      replayed: boolean;
      ok: false;
      error: unknown;
    };

async function runScenario(commands: Command[]) {
  const clock = manualClock();
  const shared = memoryStore({ clock });
  const events: IdempotencyEvent[] = [];
  const effects: { key: string; id: number; version: number }[] = [];
  const resolutions: Resolution[] = [];
  const gates: (() => void)[] = [];
  let effectCounter = 0;
  let declineCounter = 0;

  const newProcess = () => {
    const { store, freeze, frozen } = freezable(shared);
    const engine = createIdempotency({
      store,
      clock,
      leaseMs: LEASE_MS,
      ttlMs: TTL_MS,
      onEvent: (event) => events.push(event),
    });
    return { engine, alive: () => !frozen(), crash: freeze };
  };
  let process = newProcess();

  const execute = (
    { engine, alive, crash }: ReturnType<typeof newProcess>,
    key: string,
    variant: number,
    behaviour: Behaviour,
  ) => {
    const promise = engine.execute(
      { scope: 'user:1/op', key, fingerprint: `${key}/${variant}` },
      async (ctx) => {
        if (behaviour === 'decline') {
          throw Object.assign(new Error(`declined #${++declineCounter}`), { status: 402 });
        }
        if (behaviour === 'crash-before-effect') {
          crash();
          return new Promise<never>(() => {});
        }
        const effect = await ctx.step('effect', async () => {
          // A crashed process runs nothing more.
          if (!alive()) await new Promise<never>(() => {});
          const id = ++effectCounter;
          effects.push({ key, id, version: ctx.version });
          return id;
        });
        if (behaviour === 'crash-after-effect') {
          crash();
          return new Promise<never>(() => {});
        }
        if (behaviour === 'transient') throw new Error('connection reset');
        if (behaviour === 'slow') await new Promise<void>((resolve) => gates.push(resolve));
        return { effect, variant };
      },
    );
    promise.then(
      (result) =>
        resolutions.push({ key, replayed: result.replayed, ok: true, value: result.value }),
      (error: unknown) => resolutions.push({ key, replayed: wasReplayed(error), ok: false, error }),
    );
    return promise;
  };

  for (const command of commands) {
    if (command.type === 'execute') {
      const current = process;
      void execute(current, command.key, command.variant, command.behaviour).catch(() => undefined);
      if (command.behaviour.startsWith('crash')) {
        await settle(6);
        process = newProcess();
      }
    } else if (command.type === 'duplicates') {
      for (let index = 0; index < command.count; index++) {
        void execute(process, command.key, 0, 'ok').catch(() => undefined);
      }
    } else if (command.type === 'advance') {
      clock.advance(command.ms);
    } else if (command.type === 'resume') {
      for (const open of gates.splice(0)) open();
    } else {
      process.crash();
      process = newProcess();
    }
    await settle(6);
  }

  // Let every live attempt finish, then ask each key once more from a healthy process.
  for (const open of gates.splice(0)) open();
  await settle(6);
  clock.advance(LEASE_MS * 2);
  await settle(6);
  const final = newProcess();
  const finals = await Promise.allSettled(
    KEYS.map((key) =>
      final.engine.execute({ scope: 'user:1/op', key, fingerprint: `${key}/0` }, () => 'final'),
    ),
  );
  return { events, effects, resolutions, finals };
}

/** Checks the scenario's history against the reference model of a key's epochs. */
function checkAgainstModel({
  events,
  effects,
  resolutions,
  finals,
}: Awaited<ReturnType<typeof runScenario>>) {
  for (const settled of finals) {
    if (settled.status === 'rejected') {
      expect(
        isRequestInProgressError(settled.reason),
        'a key stayed blocked after every lease ran out',
      ).toBe(false);
    }
  }

  // Epochs from the engine's own events, in order: a fresh claim starts one.
  const epochOfVersion = new Map<string, number | undefined>();
  const completionsPerEpoch = new Map<string, number>();
  let epoch = 0;
  const currentEpoch = new Map<string, number>();
  for (const event of events) {
    if (event.type === 'claimed') currentEpoch.set(event.key, ++epoch);
    if (event.type === 'claimed' || event.type === 'takeover') {
      epochOfVersion.set(`${event.key}@${event.version}`, currentEpoch.get(event.key));
    }
    if (event.type === 'completed') {
      const id = `${event.key}#${epochOfVersion.get(`${event.key}@${event.version}`)}`;
      completionsPerEpoch.set(id, (completionsPerEpoch.get(id) ?? 0) + 1);
    }
  }
  for (const [id, count] of completionsPerEpoch) expect(count, `completions of ${id}`).toBe(1);

  // At most one effect per key and epoch: steps carry across crashes and takeovers.
  const effectsPerEpoch = new Map<string, number[]>();
  for (const effect of effects) {
    const id = `${effect.key}#${epochOfVersion.get(`${effect.key}@${effect.version}`)}`;
    effectsPerEpoch.set(id, [...(effectsPerEpoch.get(id) ?? []), effect.id]);
  }
  for (const [id, ids] of effectsPerEpoch) expect(ids, `effects of ${id}`).toHaveLength(1);

  // Every replay equals the outcome the key's completing attempt returned.
  const stored = new Map<string, Resolution>();
  for (const resolution of resolutions) {
    const expectedStored = !resolution.ok && isIdempotencyError(resolution.error);
    if (expectedStored) continue;
    if (!resolution.replayed) {
      if (resolution.ok || (resolution.error as { status?: number }).status === 402) {
        stored.set(resolution.key, resolution);
      }
      continue;
    }
    const original = stored.get(resolution.key);
    if (!original) continue; // its original answered a process that crashed or a finished epoch
    if (resolution.ok) {
      expect(original.ok).toBe(true);
      if (original.ok) expect(resolution.value).toEqual(original.value);
    } else if (!original.ok) {
      expect((resolution.error as Error).message).toBe((original.error as Error).message);
    }
  }
}

describe('engine against the reference model', () => {
  it('never commits an effect twice per stored outcome and replays exactly', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(commandArb, { minLength: 1, maxLength: 25 }), async (commands) => {
        checkAgainstModel(await runScenario(commands));
      }),
      { numRuns: Number(process.env.FC_NUM_RUNS ?? 1_000) },
    );
  }, 120_000);
});
