/** Where the fake provider sends its webhooks: the shop's receiver (`app/api/webhooks/payments`). */
export const PAYMENT_WEBHOOK_PATH = '/api/webhooks/payments';

/** The provider's event for a charge that went through, as its webhooks carry it. */
export interface PaymentSucceededEvent {
  /** The provider's event id: the same on every delivery of this event. */
  id: string;
  type: 'payment.succeeded';
  data: { chargeId: string; checkoutKey: string; amountCents: number };
}

/** The event id of a webhook body, if it has one: the receiver's idempotency key. */
export function eventIdOf(body: unknown): string | undefined {
  const id = (body as { id?: unknown } | null | undefined)?.id;
  return typeof id === 'string' ? id : undefined;
}

/** An id the shop stores as text: printable ASCII, as the provider's ids are. */
const STORABLE_ID = /^[\x20-\x7e]{1,255}$/;

/** The largest amount the shop's `integer` columns hold, in cents. */
const MAX_CENTS = 2_147_483_647;

/**
 * The body as a `payment.succeeded` event, or `undefined` when it is not one, or holds
 * what the shop's tables cannot (an id with U+0000, an amount past their `integer`): the
 * receiver's 400, stored with the event's key, where the database would fail every delivery.
 */
export function parsePaymentEvent(body: unknown): PaymentSucceededEvent | undefined {
  const event = body as Partial<PaymentSucceededEvent> | null;
  const data = event?.data;
  if (
    typeof event?.id !== 'string' ||
    event.type !== 'payment.succeeded' ||
    typeof data?.chargeId !== 'string' ||
    !STORABLE_ID.test(data.chargeId) ||
    typeof data.checkoutKey !== 'string' ||
    !STORABLE_ID.test(data.checkoutKey) ||
    !Number.isSafeInteger(data.amountCents) ||
    Math.abs(data.amountCents ?? 0) > MAX_CENTS
  ) {
    return undefined;
  }
  return event as PaymentSucceededEvent;
}
