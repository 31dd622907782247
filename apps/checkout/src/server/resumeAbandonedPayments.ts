import { idempotencyContext } from '@idem/server';
import { idempotencyKeys } from '@idem/server/postgres';
import { and, eq, sql } from 'drizzle-orm';
import { crashSwitch } from './crashAfterCharge';
import { checkouts } from './db/schema';
import { appRouter } from './routers/appRouter';
import { PAY_SCOPE } from './routers/checkout';
import type { Runtime } from './runtime';

/**
 * How long after its lease ran out a payment counts as abandoned. Long next to a browser's
 * own retries (every ≤ 2 s), which take the key over first while the person is still there.
 */
export const ABANDONED_AFTER_MS = 15_000;
const CHECK_EVERY_MS = 5_000;

/**
 * Finishes payments nobody came back for: a server that died after the charge, and a
 * person who then closed the tab, would otherwise leave a charge with no order and a key
 * in progress for good. The server is simply the next attempt: it calls Pay with the
 * checkout's key, takes the key over, finds the charge in its recovery point and places
 * the one order (or replays, if a browser got there first).
 */
export function resumeAbandonedPayments(runtime: Runtime): { stop(): void } {
  let running = false;
  const tick = async () => {
    if (running) return;
    running = true;
    try {
      const abandoned = await runtime.db
        .select({ id: checkouts.id, sessionId: checkouts.sessionId })
        .from(checkouts)
        .innerJoin(
          idempotencyKeys,
          and(
            eq(idempotencyKeys.key, checkouts.id),
            eq(idempotencyKeys.scope, `${PAY_SCOPE}/checkout.pay`),
          ),
        )
        .where(
          and(
            eq(checkouts.status, 'paying'),
            eq(idempotencyKeys.status, 'in_progress'),
            sql`${idempotencyKeys.lockedUntil} < now() - ${`${ABANDONED_AFTER_MS} milliseconds`}::interval`,
          ),
        )
        .limit(10);
      for (const { id, sessionId } of abandoned) {
        const caller = appRouter.createCaller({
          ...idempotencyContext({ key: undefined }),
          sessionId,
          crash: crashSwitch(),
          runtime,
        });
        // A decline is stored, a 409 means a browser is on it: either way, nothing to do.
        await caller.checkout.pay({ checkoutId: id }).catch(() => undefined);
      }
    } catch (error) {
      console.error('resuming abandoned payments:', error);
    } finally {
      running = false;
    }
  };
  const timer = setInterval(tick, CHECK_EVERY_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
