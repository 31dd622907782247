import { idempotentHandler } from '@idem/server/fetch';
import { paymentConfirmations } from '@/server/db/schema';
import {
  eventIdOf,
  PAYMENT_WEBHOOK_PATH,
  parsePaymentEvent,
} from '@/server/payments/paymentEvents';
import { getRuntime } from '@/server/runtime';
import { runtimeStore } from '@/server/runtimeStore';

export const dynamic = 'force-dynamic';

/**
 * The fake provider's webhooks. The key is the provider's event id, derived from the body
 * on the server, so every delivery of one event is one request to idem: the first runs
 * the handler, a redelivery gets the stored answer (`Idempotent-Replayed: true`) and
 * confirms nothing twice. A body without an event id is a 400 problem that stores nothing.
 */
export const POST = idempotentHandler(
  {
    store: runtimeStore,
    // The one sender. A real receiver checks the provider's signature before this, and
    // names the provider account here.
    scope: () => 'provider:fakepay',
    route: PAYMENT_WEBHOOK_PATH,
    key: ({ json }) => eventIdOf(json),
  },
  async (request) => {
    const event = parsePaymentEvent(await request.json());
    if (!event) {
      // Stored under the event id: the same delivery gets the same answer.
      return Response.json({ error: 'Not a payment.succeeded event.' }, { status: 400 });
    }
    const { db } = await getRuntime();
    const [confirmation] = await db
      .insert(paymentConfirmations)
      .values({
        eventId: event.id,
        checkoutKey: event.data.checkoutKey,
        chargeId: event.data.chargeId,
        amountCents: event.data.amountCents,
      })
      .returning({ id: paymentConfirmations.id });
    return Response.json({ received: event.id, confirmation: confirmation?.id ?? null });
  },
);
