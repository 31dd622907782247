import { randomUUID } from 'node:crypto';
import {
  isConfigurationError,
  isInvalidKeyError,
  isKeyMismatchError,
  isRequestInProgressError,
} from '@idem/core';
import { sql } from 'drizzle-orm';
import { notFound, redirect } from 'next/navigation.js';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  IDEMPOTENCY_KEY_FIELD,
  type IdempotencyRefusal,
  idempotencyKeyField,
  idempotentAction,
} from '../src/next/index.js';
import { Gates } from './fixtures/testApp.js';
import { countOf, driverBackends, useDatabase } from './harness.js';

/** A form as the browser posts it: its fields, and the hidden key field rendered with it. */
function form(fields: Record<string, string>, key?: string): FormData {
  const data = new FormData();
  if (key !== undefined) data.append(IDEMPOTENCY_KEY_FIELD, key);
  for (const [name, value] of Object.entries(fields)) data.append(name, value);
  return data;
}

/** What the action threw (it must throw). */
async function thrownBy(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the action to throw');
}

for (const backend of driverBackends) {
  describe(`idempotentAction on ${backend}`, () => {
    const database = useDatabase(backend);
    const gates = new Gates();
    let runs = 0;

    beforeAll(async () => {
      await database().db.execute(
        sql`create table if not exists action_orders (id serial primary key, sku text not null)`,
      );
    });

    const ordersOf = (sku: string) =>
      countOf(database().db, sql`select count(*)::int as n from action_orders where sku = ${sku}`);

    /** A lease-mode checkout: one order per run, answered with its id. */
    const leaseCheckout = (extra: { inProgress?: 'reject' } = {}) =>
      idempotentAction(
        {
          db: () => database().db,
          name: 'checkout/pay',
          scope: () => 'session:ann',
          onRefusal: (refusal: IdempotencyRefusal) => ({ refused: refusal }),
          ...extra,
        },
        async (idempotency, data: FormData) => {
          runs++;
          const sku = String(data.get('sku'));
          if (data.get('gate') === 'yes') await gates.wait(sku);
          await database().db.execute(sql`insert into action_orders (sku) values (${sku})`);
          return { sku, key: idempotency.key };
        },
      );

    it('runs a form submitted twice with one key once, and gives the second the first result', async () => {
      const pay = leaseCheckout();
      const key = randomUUID();
      const before = runs;
      const first = await pay(form({ sku: 'twice' }, key));
      const second = await pay(form({ sku: 'twice' }, key));
      expect(first).toEqual({ sku: 'twice', key });
      expect(second).toEqual(first);
      expect(runs - before).toBe(1);
      expect(await ordersOf('twice')).toBe(1);
    });

    it('makes a second submit that arrives while the first runs wait for it and get its result', async () => {
      const pay = leaseCheckout();
      const key = randomUUID();
      const first = pay(form({ sku: 'double-click', gate: 'yes' }, key));
      await gates.arrived('double-click');
      const second = pay(form({ sku: 'double-click', gate: 'yes' }, key));
      gates.open('double-click');
      const [a, b] = await Promise.all([first, second]);
      expect(b).toEqual(a);
      expect(await ordersOf('double-click')).toBe(1);
    });

    it("answers a duplicate with onRefusal's value under inProgress 'reject'", async () => {
      const pay = leaseCheckout({ inProgress: 'reject' });
      const key = randomUUID();
      const first = pay(form({ sku: 'busy', gate: 'yes' }, key));
      await gates.arrived('busy');
      const second = (await pay(form({ sku: 'busy', gate: 'yes' }, key))) as {
        refused: IdempotencyRefusal;
      };
      gates.open('busy');
      await first;
      expect(second.refused).toMatchObject({ status: 409, code: 'REQUEST_IN_PROGRESS' });
      expect(second.refused.retryAfterMs).toBeGreaterThan(0);
      expect(await ordersOf('busy')).toBe(1);
    });

    it('refuses a key sent again with other fields (KEY_MISMATCH), thrown without onRefusal', async () => {
      const pay = idempotentAction(
        { db: () => database().db, name: 'checkout/pay', scope: () => 'session:ann' },
        async (_idempotency, data: FormData) => ({ sku: String(data.get('sku')) }),
      );
      const key = randomUUID();
      await pay(form({ sku: 'mismatch-a' }, key));
      const error = await thrownBy(pay(form({ sku: 'mismatch-b' }, key)));
      expect(isKeyMismatchError(error)).toBe(true);
    });

    it("fingerprints the form, not useActionState's previous state, and fields in any order", async () => {
      const pay = idempotentAction(
        { db: () => database().db, name: 'checkout/state', scope: () => 'session:ann' },
        async (_idempotency, previous: { attempts: number }, data: FormData) => {
          runs++;
          return { attempts: previous.attempts + 1, sku: String(data.get('sku')) };
        },
      );
      const key = randomUUID();
      const before = runs;
      const first = await pay({ attempts: 0 }, form({ sku: 'state', qty: '2' }, key));
      const reordered = new FormData();
      reordered.append('qty', '2');
      reordered.append(IDEMPOTENCY_KEY_FIELD, key);
      reordered.append('sku', 'state');
      const again = await pay({ attempts: 5 }, reordered);
      expect(again).toEqual(first);
      expect(runs - before).toBe(1);
    });

    it('stores redirect() and notFound() as the outcome, and throws them again on a replay', async () => {
      let ran = 0;
      const pay = idempotentAction(
        { db: () => database().db, name: 'checkout/redirect', scope: () => 'session:ann' },
        async (_idempotency, data: FormData) => {
          ran++;
          if (data.get('sku') === 'missing') notFound();
          redirect(`/orders/${String(data.get('sku'))}`);
        },
      );
      const key = randomUUID();
      const first = (await thrownBy(pay(form({ sku: 'r1' }, key)))) as { digest: string };
      const again = (await thrownBy(pay(form({ sku: 'r1' }, key)))) as { digest: string };
      expect(first.digest).toMatch(/^NEXT_REDIRECT;replace;\/orders\/r1;307;/);
      expect(again.digest).toBe(first.digest);
      const missingKey = randomUUID();
      const gone = (await thrownBy(pay(form({ sku: 'missing' }, missingKey)))) as {
        digest: string;
      };
      const goneAgain = (await thrownBy(pay(form({ sku: 'missing' }, missingKey)))) as {
        digest: string;
      };
      expect(gone.digest).toBe('NEXT_HTTP_ERROR_FALLBACK;404');
      expect(goneAgain.digest).toBe(gone.digest);
      expect(ran).toBe(2);
    });

    it('releases the key after a transient failure, so a resubmission runs again', async () => {
      let ran = 0;
      const pay = idempotentAction(
        { db: () => database().db, name: 'checkout/flaky', scope: () => 'session:ann' },
        async (_idempotency, _form: FormData) => {
          ran++;
          if (ran === 1) throw new Error('the provider did not answer');
          return { paid: true };
        },
      );
      const key = randomUUID();
      const error = (await thrownBy(pay(form({ sku: 'flaky' }, key)))) as Error;
      expect(error.message).toBe('the provider did not answer');
      expect(await pay(form({ sku: 'flaky' }, key))).toEqual({ paid: true });
      expect(ran).toBe(2);
    });

    it('keeps one transaction: a stored 4xx failure undoes the writes and replays the error', async () => {
      let ran = 0;
      const pay = idempotentAction(
        {
          mode: 'transaction',
          db: () => database().db,
          name: 'checkout/tx',
          scope: () => 'session:ann',
        },
        async ({ tx }, data: FormData) => {
          ran++;
          const sku = String(data.get('sku'));
          await tx.execute(sql`insert into action_orders (sku) values (${sku})`);
          if (sku === 'declined') {
            throw Object.assign(new Error('The card was declined'), { status: 402 });
          }
          return { sku };
        },
      );
      const paid = randomUUID();
      expect(await pay(form({ sku: 'tx-paid' }, paid))).toEqual({ sku: 'tx-paid' });
      expect(await pay(form({ sku: 'tx-paid' }, paid))).toEqual({ sku: 'tx-paid' });
      const declined = randomUUID();
      const first = (await thrownBy(pay(form({ sku: 'declined' }, declined)))) as Error;
      const replayed = (await thrownBy(pay(form({ sku: 'declined' }, declined)))) as Error;
      expect(first.message).toBe('The card was declined');
      expect(replayed).toMatchObject({ message: 'The card was declined', status: 402 });
      expect(ran).toBe(2);
      expect(await ordersOf('tx-paid')).toBe(1);
      expect(await ordersOf('declined')).toBe(0);
    });

    it('keeps two sessions apart: one key in two scopes runs twice', async () => {
      let session = 'ann';
      const pay = idempotentAction(
        { db: () => database().db, name: 'checkout/scoped', scope: () => `session:${session}` },
        async (_idempotency, _form: FormData) => ({ session }),
      );
      const key = randomUUID();
      expect(await pay(form({}, key))).toEqual({ session: 'ann' });
      session = 'bob';
      expect(await pay(form({}, key))).toEqual({ session: 'bob' });
    });

    it('takes a key derived from the arguments, for an action called without a form', async () => {
      let ran = 0;
      const place = idempotentAction(
        {
          db: () => database().db,
          name: 'orders/place',
          scope: () => 'session:ann',
          key: (intent: { id: string; cents: number }) => `intent:${intent.id}`,
        },
        async (idempotency, intent: { id: string; cents: number }) => {
          ran++;
          return { key: idempotency.key, cents: intent.cents };
        },
      );
      const id = randomUUID();
      const first = await place({ id, cents: 500 });
      expect(await place({ id, cents: 500 })).toEqual(first);
      expect(first).toEqual({ key: `intent:${id}`, cents: 500 });
      expect(isKeyMismatchError(await thrownBy(place({ id, cents: 900 })))).toBe(true);
      expect(ran).toBe(1);
    });
  });
}

describe('idempotentAction without a database', () => {
  const noop = async (_idempotency: unknown, _form: FormData) => ({ ok: true });

  it('refuses a form without its key, naming the field to render; runs it unkeyed with required: false', async () => {
    const { memoryStore } = await import('@idem/core/testing');
    const pay = idempotentAction({ store: memoryStore(), name: 'pay', scope: () => 's' }, noop);
    const error = (await thrownBy(pay(form({ sku: 'a' })))) as Error;
    expect(isInvalidKeyError(error)).toBe(true);
    expect(error.message).toContain('idempotencyKeyField()');
    let context: unknown = 'unset';
    const open = idempotentAction(
      { store: memoryStore(), name: 'pay', scope: () => 's', required: false },
      async (idempotency, _form: FormData) => {
        context = idempotency;
        return 'ran';
      },
    );
    expect(await open(form({ sku: 'a' }))).toBe('ran');
    expect(context).toBeUndefined();
  });

  it('refuses a form whose key field is given twice with two values, and an invalid key', async () => {
    const { memoryStore } = await import('@idem/core/testing');
    const pay = idempotentAction({ store: memoryStore(), name: 'pay', scope: () => 's' }, noop);
    const twice = form({}, 'a');
    twice.append(IDEMPOTENCY_KEY_FIELD, 'b');
    expect(isInvalidKeyError(await thrownBy(pay(twice)))).toBe(true);
    expect(isInvalidKeyError(await thrownBy(pay(form({}, 'ключ'))))).toBe(true);
  });

  it('renders a hidden field with a fresh key, or the key given, and refuses an invalid one', () => {
    const a = idempotencyKeyField();
    const b = idempotencyKeyField();
    expect(a).toMatchObject({ type: 'hidden', name: 'idempotency-key' });
    expect(a.value).not.toBe(b.value);
    expect(idempotencyKeyField('checkout:42').value).toBe('checkout:42');
    expect(() => idempotencyKeyField('')).toThrow(/key/i);
  });

  it('is typed for useActionState: (state, form) => Promise<state>, refusals joined through onRefusal', async () => {
    const { memoryStore } = await import('@idem/core/testing');
    type State = { status: 'idle' | 'paid' | 'refused'; message?: string };
    const pay = idempotentAction(
      {
        store: memoryStore(),
        name: 'pay',
        scope: () => 's',
        onRefusal: (refusal): State => ({ status: 'refused', message: refusal.message }),
      },
      async (_idempotency, _previous: State, _form: FormData): Promise<State> => ({
        status: 'paid',
      }),
    );
    // What React's useActionState takes as its action, for a form's FormData.
    const asActionState: (state: State, payload: FormData) => State | Promise<State> = pay;
    expect(await asActionState({ status: 'idle' }, form({}, 'typed'))).toEqual({ status: 'paid' });
    expect(await asActionState({ status: 'idle' }, form({}))).toMatchObject({ status: 'refused' });
  });

  it('throws ConfigurationError at start-up for options that cannot work', () => {
    const errors = [
      () => idempotentAction({ name: 'pay', scope: () => 's' }, noop),
      () =>
        idempotentAction(
          { store: { claim: () => undefined } as never, name: '', scope: () => 's' },
          noop,
        ),
      () =>
        idempotentAction(
          { store: {} as never, name: 'pay', scope: undefined as never },
          noop as never,
        ),
      () =>
        idempotentAction(
          { store: {} as never, name: 'pay', scope: () => 's', maxInputBytes: 0 },
          noop,
        ),
      () =>
        idempotentAction(
          { store: {} as never, name: 'pay', scope: () => 's', key: 'k' as never },
          noop,
        ),
    ];
    for (const make of errors) {
      let thrown: unknown;
      try {
        make();
      } catch (error) {
        thrown = error;
      }
      expect(isConfigurationError(thrown), String(thrown)).toBe(true);
    }
  });

  it('refuses input it cannot fingerprint with a 400 before anything runs', async () => {
    const { memoryStore } = await import('@idem/core/testing');
    let ran = 0;
    const place = idempotentAction(
      {
        store: memoryStore(),
        name: 'place',
        scope: () => 's',
        key: (_input: unknown) => 'k1',
        onRefusal: (refusal) => refusal,
      },
      async (_idempotency, _input: unknown) => {
        ran++;
      },
    );
    const big = { note: 'x'.repeat(1_100_000) };
    expect(await place(big)).toMatchObject({ status: 413, code: 'INPUT_TOO_LARGE' });
    expect(ran).toBe(0);
  });

  it('waits for a busy key in transaction-less lease mode by default, and throws RequestInProgressError past the wait', async () => {
    const { memoryStore } = await import('@idem/core/testing');
    const gates = new Gates();
    const pay = idempotentAction(
      { store: memoryStore(), name: 'pay', scope: () => 's', inProgress: { waitMs: 50 } },
      async (_idempotency, _form: FormData) => {
        await gates.wait('slow');
        return 'done';
      },
    );
    const first = pay(form({}, 'k'));
    await gates.arrived('slow');
    expect(isRequestInProgressError(await thrownBy(pay(form({}, 'k'))))).toBe(true);
    gates.open('slow');
    expect(await first).toBe('done');
    expect(await pay(form({}, 'k'))).toBe('done');
  });
});
