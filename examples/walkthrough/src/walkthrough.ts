import {
  createIdempotency,
  type HandlerContext,
  isKeyMismatchError,
  isRequestInProgressError,
} from '@idem/core';
import type { IdempotencyStore } from '@idem/core/store';
import { memoryStore } from '@idem/core/testing';

/**
 * A walk through the key state machine with the memory store: a first run, a replay, a
 * payload mismatch, and a takeover after a crash that resumes from a recovery point.
 */

const LEASE_MS = 300;
const say = (line = '') => process.stdout.write(`${line}\n`);
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One app server. `crash()` makes it stop dead: it never talks to the store again. */
function appServer(name: string, shared: IdempotencyStore) {
  let dead = false;
  const store = new Proxy(shared, {
    get(target, property: keyof IdempotencyStore) {
      const method = target[property] as (...args: unknown[]) => Promise<unknown>;
      return (...args: unknown[]) => (dead ? new Promise(() => {}) : method.apply(target, args));
    },
  });
  const idempotency = createIdempotency({
    store,
    leaseMs: LEASE_MS,
    ttlMs: 60_000,
    onEvent: (event) => say(`   [${name}] event ${event.type} (version ${event.version})`),
  });
  return { name, idempotency, crash: () => (dead = true), isDead: () => dead };
}

const shared = memoryStore();
const serverA = appServer('server A', shared);
const serverB = appServer('server B', shared);
const charges: string[] = [];

/** The "card charge" a payment provider would make; counted so duplicates show. */
async function placeOrder(
  ctx: HandlerContext,
  server: ReturnType<typeof appServer>,
  crashAfterCharge: boolean,
) {
  const charge = await ctx.step('charge', async () => {
    const chargeId = `ch_${charges.length + 1}`;
    charges.push(chargeId);
    say(
      `   [${server.name}] charged the card: ${chargeId} (provider key ${ctx.deriveKey('charge')})`,
    );
    return { chargeId };
  });
  if (crashAfterCharge) {
    say(`   [${server.name}] crashes after the charge, before answering`);
    server.crash();
    return new Promise<never>(() => {});
  }
  return { orderId: 'order-1001', chargeId: charge.chargeId, attempt: ctx.attempt };
}

const scope = 'user:alice/orders.create';
const input = { sku: 'tea', quantity: 2 };

say('1. claim: a new key runs the handler once');
const first = await serverA.idempotency.execute({ scope, key: 'key-1', input }, (ctx) =>
  placeOrder(ctx, serverA, false),
);
say(`   → ${JSON.stringify(first.value)} replayed=${first.replayed}`);
say();

say('2. replay: the same key and payload again returns the stored answer, no second charge');
const again = await serverB.idempotency.execute({ scope, key: 'key-1', input }, (ctx) =>
  placeOrder(ctx, serverB, false),
);
say(`   → ${JSON.stringify(again.value)} replayed=${again.replayed}`);
say();

say('3. mismatch: the same key with another payload is refused');
try {
  await serverB.idempotency.execute(
    { scope, key: 'key-1', input: { sku: 'tea', quantity: 3 } },
    (ctx) => placeOrder(ctx, serverB, false),
  );
} catch (error) {
  if (!isKeyMismatchError(error)) throw error;
  say(`   → ${error.code}: ${error.message}`);
}
say();

say('4. takeover: server A crashes mid-request; server B takes over after the lease');
void serverA.idempotency.execute({ scope, key: 'key-2', input }, (ctx) =>
  placeOrder(ctx, serverA, true),
);
while (!serverA.isDead()) await pause(5);
try {
  await serverB.idempotency.execute({ scope, key: 'key-2', input }, (ctx) =>
    placeOrder(ctx, serverB, false),
  );
} catch (error) {
  if (!isRequestInProgressError(error)) throw error;
  say(`   → a retry right away: ${error.code}, retry after ${error.retryAfterMs} ms`);
}
await pause(LEASE_MS + 20);
const takeover = await serverB.idempotency.execute({ scope, key: 'key-2', input }, (ctx) =>
  placeOrder(ctx, serverB, false),
);
say(`   → after the lease: ${JSON.stringify(takeover.value)} (version ${takeover.version})`);
say();

say(
  `Charges made: ${charges.length} for 2 orders (${charges.join(', ')}) — each card charged exactly once.`,
);
