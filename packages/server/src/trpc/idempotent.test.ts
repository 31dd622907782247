import { type IdempotencyEvent, isConfigurationError } from '@idem/core';
import { memoryStore } from '@idem/core/testing';
import { initTRPC, TRPCError } from '@trpc/server';
import { describe, expect, it } from 'vitest';
import { idempotencyContext } from './idempotencyContext.js';
import { idempotent } from './idempotent.js';
import { idempotentProcedure } from './idempotentProcedure.js';

interface Context {
  idempotencyRequest: ReturnType<typeof idempotencyContext>['idempotencyRequest'];
  user: string;
}
const t = initTRPC.context<Context>().create();
const context = (key: string | undefined, user = 'alice'): Context => ({
  ...idempotencyContext({ key }),
  user,
});

describe('idempotent() options', () => {
  const store = memoryStore();
  const scope = () => 'tenant';

  it.each([
    ['no scope', { store }, 'needs `scope'],
    ['both store and db', { store, db: {} as never, scope }, 'not both'],
    ['neither store nor db', { scope }, 'needs `db`'],
    ['transaction mode with a store', { mode: 'transaction', store, scope }, 'needs `db`'],
    [
      'an unknown mode',
      { mode: 'eventual', store, scope },
      "mode must be 'lease' or 'transaction'",
    ],
    ['a fractional maxInputBytes', { store, scope, maxInputBytes: 1.5 }, 'maxInputBytes'],
    ['a ttl shorter than the lease', { store, scope, leaseMs: 10_000, ttlMs: 5_000 }, 'ttlMs'],
  ])('refuses %s at start-up', (_, options, message) => {
    let error: unknown;
    try {
      idempotent(options as never);
    } catch (caught) {
      error = caught;
    }
    expect(isConfigurationError(error)).toBe(true);
    expect((error as Error).message).toContain(message);
  });
});

describe('idempotent() through createCaller', () => {
  it('stores the scope as principal/path, percent-encoding "/" and "%" in the principal', async () => {
    const store = memoryStore();
    const router = t.router({
      echo: t.procedure
        .use(idempotent({ store, scope: ({ ctx }) => ctx.user }))
        .mutation(() => 'ok'),
    });
    const caller = (user: string) => t.createCallerFactory(router)(context('k', user));
    await caller('a/b%').echo();
    await caller('a').echo();
    expect(await store.get('a%2Fb%25/echo', 'k')).not.toBeNull();
    expect(await store.get('a/echo', 'k')).not.toBeNull();
  });

  it('reports every step to onEvent, and swallows what onEvent throws', async () => {
    const events: IdempotencyEvent['type'][] = [];
    const router = t.router({
      echo: t.procedure
        .use(
          idempotent({
            store: memoryStore(),
            scope: () => 'tenant',
            onEvent: (event) => {
              events.push(event.type);
              throw new Error('a broken logger');
            },
          }),
        )
        .mutation(() => 'ok'),
    });
    const caller = t.createCallerFactory(router)(context('k'));
    expect(await caller.echo()).toBe('ok');
    expect(await caller.echo()).toBe('ok');
    expect(events).toEqual(['claimed', 'completed', 'replayed']);
  });

  it('lets errorPolicy decide: here a plain exception is stored and replayed', async () => {
    let runs = 0;
    const router = t.router({
      fail: t.procedure
        .use(
          idempotent({ store: memoryStore(), scope: () => 'tenant', errorPolicy: () => 'store' }),
        )
        .mutation(() => {
          runs++;
          throw new Error('the warehouse said no');
        }),
    });
    const caller = t.createCallerFactory(router)(context('k'));
    for (let attempt = 0; attempt < 2; attempt++) {
      await expect(caller.fail()).rejects.toMatchObject({
        code: 'INTERNAL_SERVER_ERROR',
        message: 'the warehouse said no',
      });
    }
    expect(runs).toBe(1);
  });

  it('refuses a scope() that names nobody, and a context without idempotencyContext()', async () => {
    const store = memoryStore();
    const router = t.router({
      empty: t.procedure.use(idempotent({ store, scope: () => '' })).mutation(() => 'ok'),
      fine: t.procedure.use(idempotent({ store, scope: () => 'x' })).mutation(() => 'ok'),
    });
    const caller = t.createCallerFactory(router);
    const empty = await caller(context('k'))
      .empty()
      .catch((error: unknown) => error);
    expect(empty).toBeInstanceOf(TRPCError);
    expect(empty).toMatchObject({
      code: 'INTERNAL_SERVER_ERROR',
      message: expect.stringContaining('scope() returned an empty string for "empty"'),
    });
    const bare = await caller({ user: 'x' } as unknown as Context)
      .fine()
      .catch((error: unknown) => error);
    expect(bare).toMatchObject({
      code: 'INTERNAL_SERVER_ERROR',
      message: expect.stringContaining('spread idempotencyContext(opts)'),
    });
  });

  it("answers the app's own failure in scope() or key() as the app's, not as a store failure", async () => {
    const store = memoryStore();
    const sessionGone = new Error('the session store is down');
    const router = t.router({
      scoped: t.procedure
        .use(
          idempotent({
            store,
            scope: () => {
              throw sessionGone;
            },
          }),
        )
        .mutation(() => 'ok'),
      keyed: t.procedure
        .use(
          idempotent({
            store,
            scope: () => 'x',
            key: () => {
              throw new TRPCError({ code: 'UNAUTHORIZED', message: 'sign in first' });
            },
          }),
        )
        .mutation(() => 'ok'),
    });
    const caller = t.createCallerFactory(router)(context('k'));
    const scoped = await caller.scoped().catch((error: unknown) => error);
    expect(scoped).toMatchObject({
      code: 'INTERNAL_SERVER_ERROR',
      message: 'the session store is down',
      cause: sessionGone,
    });
    expect(await caller.keyed().catch((error: unknown) => error)).toMatchObject({
      code: 'UNAUTHORIZED',
      message: 'sign in first',
    });
  });

  it('answers a recovery point the store could not save as the store’s failure, without its words', async () => {
    const memory = memoryStore();
    const lost = new Error('Failed query: update "idem_keys" set "steps" = $1');
    const store = { ...memory, saveStep: () => Promise.reject(lost) };
    for (const method of ['claim', 'complete', 'release', 'heartbeat', 'get'] as const) {
      Object.assign(store, { [method]: memory[method].bind(memory) });
    }
    const router = t.router({
      pay: t.procedure
        .use(idempotent({ store, scope: () => 'x', onStoreError: () => undefined }))
        .mutation(async ({ ctx }) => ctx.idempotency.step('charge', () => 'ch_1')),
    });
    const failed = await t
      .createCallerFactory(router)(context('k'))
      .pay()
      .catch((error: unknown) => error);
    expect(failed).toMatchObject({ code: 'INTERNAL_SERVER_ERROR' });
    expect((failed as Error).message).toMatch(/idempotency store failed/i);
    expect((failed as Error).message).not.toMatch(/idem_keys|update/);
    expect((await memory.get('x/pay', 'k'))?.status).toBe('in_progress');
  });

  it('works the same through .concat(idempotentProcedure(...))', async () => {
    let runs = 0;
    const app = initTRPC.context<Context>().create();
    const keyed = app.procedure.concat(
      idempotentProcedure({ store: memoryStore(), scope: ({ ctx }: { ctx: Context }) => ctx.user }),
    );
    const router = app.router({
      create: keyed.mutation(({ ctx }) => ({ run: ++runs, key: ctx.idempotency.key })),
    });
    const caller = app.createCallerFactory(router);
    expect(await caller(context('k')).create()).toEqual({ run: 1, key: 'k' });
    expect(await caller(context('k')).create()).toEqual({ run: 1, key: 'k' });
    expect(await caller(context('k', 'bob')).create()).toEqual({ run: 2, key: 'k' });
    await expect(caller(context(undefined)).create()).rejects.toMatchObject({
      code: 'BAD_REQUEST',
    });
  });
});
