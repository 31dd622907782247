import { idempotentHandler, PROBLEM_CONTENT_TYPE, type ProblemDocument } from '@idem/server/fetch';
import { paymentConfirmations } from '@/server/db/schema';
import {
  eventIdOf,
  PAYMENT_WEBHOOK_PATH,
  parsePaymentEvent,
} from '@/server/payments/paymentEvents';
import {
  type SignatureProblem,
  verifyWebhook,
  WEBHOOK_SIGNATURE_HEADER,
  webhookSecret,
} from '@/server/payments/webhookSignature';
import { getRuntime } from '@/server/runtime';

export const dynamic = 'force-dynamic';

/**
 * The fake provider's webhooks. The key is the provider's event id, derived from the body
 * on the server, so every delivery of one event is one request to idem: the first runs
 * the handler, a redelivery gets the stored answer (`Idempotent-Replayed: true`) and
 * confirms nothing twice. A body without an event id is a 400 problem that stores nothing.
 *
 * Transaction mode: the confirmation is written through `tx`, the transaction that also
 * claims and completes the event id, so the two commit together or not at all. A
 * connection lost between them takes both away, and the provider's retry (it sends the
 * same bytes again after a 5xx) confirms the payment once; in lease mode the
 * confirmation could commit without its answer, and the retry would confirm it again.
 */
const receive = idempotentHandler(
  {
    mode: 'transaction',
    // The runtime's database once it has started (this module loads before it is open).
    // On PGlite the handler uses `tx` alone: `db` waits for the transaction to end.
    db: async () => (await getRuntime()).db,
    // The caller is the payment provider: `POST` below hands `receive` only deliveries
    // whose signature it checked, and the provider is the one holder of the secret. The
    // event ids are the provider's own, so they are keyed under the provider, one principal
    // for every delivery (a shop with several provider accounts names the account here).
    scope: () => 'provider:fakepay',
    route: PAYMENT_WEBHOOK_PATH,
    key: ({ json }) => eventIdOf(json),
  },
  async (request, { tx }) => {
    const event = parsePaymentEvent(await request.json());
    if (!event) {
      // Stored under the event id: the same delivery gets the same answer.
      return Response.json(
        {
          error:
            'Not a payment.succeeded event the shop can record: it needs string ids of 1–255 ' +
            'printable ASCII characters (data.chargeId, data.checkoutKey) and data.amountCents, ' +
            'an integer within ±2,147,483,647.',
        },
        { status: 400 },
      );
    }
    const [confirmation] = await tx
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

const WHAT_IS_WRONG: Record<SignatureProblem, string> = {
  missing: 'missing',
  malformed: 'not t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">',
  expired: 'more than five minutes away from the current time',
  mismatch: 'not the provider’s signature of this body',
};

/**
 * Only the provider's own deliveries reach the handler: a body whose
 * `fakepay-signature` is missing, malformed, older than five minutes or not the provider's
 * HMAC of these exact bytes gets a 401 problem, and nothing is stored under its event id
 * (so a forged event cannot claim the id ahead of the real one).
 */
export async function POST(request: Request): Promise<Response> {
  const body = await request.clone().text();
  const problem = verifyWebhook(
    body,
    request.headers.get(WEBHOOK_SIGNATURE_HEADER),
    webhookSecret(),
  );
  if (problem) {
    const refusal: ProblemDocument & { reason: SignatureProblem } = {
      type: 'about:blank',
      title: 'Invalid webhook signature',
      status: 401,
      detail: `The ${WEBHOOK_SIGNATURE_HEADER} header is ${WHAT_IS_WRONG[problem]}: only the payment provider's signed deliveries are accepted.`,
      reason: problem,
    };
    return Response.json(refusal, {
      status: refusal.status,
      headers: { 'content-type': PROBLEM_CONTENT_TYPE },
    });
  }
  return receive(request);
}
