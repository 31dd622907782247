import { idempotencyContext } from '@idem/server';
import { and, eq, isNotNull } from 'drizzle-orm';
import { crashSwitch } from './crashAfterCharge';
import { checkouts } from './db/schema';
import { appRouter } from './routers/appRouter';
import type { Runtime } from './runtime';

/**
 * How long after its lease ran out a payment counts as abandoned. Long next to a browser's
 * own retries (every ≤ 2 s), which take the key over first while the person is still there.
 */
export const ABANDONED_AFTER_MS = 15_000;
const CHECK_EVERY_MS = 5_000;
/** The most payments one check takes over, one after another. */
const RESUMED_PER_CHECK = 10;

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
      for (const { id, sessionId } of await abandonedPayments(runtime)) {
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

/**
 * Checkouts being paid whose key record (read through the store, under the scope Pay
 * noted) is still in progress with a lease that ran out `ABANDONED_AFTER_MS` ago. The
 * lease's end is the database's time and the comparison this server's: it only picks
 * whom to try. Whether the lease has lapsed, and so whether Pay takes the key over, the
 * store judges by the database's clock.
 */
async function abandonedPayments(runtime: Runtime) {
  const paying = await runtime.db
    .select({ id: checkouts.id, sessionId: checkouts.sessionId, scope: checkouts.payKeyScope })
    .from(checkouts)
    .where(and(eq(checkouts.status, 'paying'), isNotNull(checkouts.payKeyScope)));
  const abandoned: { id: string; sessionId: string }[] = [];
  for (const { id, sessionId, scope } of paying) {
    if (abandoned.length === RESUMED_PER_CHECK) break;
    if (!scope) continue;
    const record = await runtime.store.get(scope, id);
    const lapsedAt = record?.status === 'in_progress' ? record.lockedUntil : null;
    if (lapsedAt !== null && lapsedAt < Date.now() - ABANDONED_AFTER_MS) {
      abandoned.push({ id, sessionId });
    }
  }
  return abandoned;
}
