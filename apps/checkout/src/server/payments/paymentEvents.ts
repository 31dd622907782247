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

/** The body as a `payment.succeeded` event, or `undefined` when it is not one. */
export function parsePaymentEvent(body: unknown): PaymentSucceededEvent | undefined {
  const event = body as Partial<PaymentSucceededEvent> | null;
  const data = event?.data;
  if (
    typeof event?.id !== 'string' ||
    event.type !== 'payment.succeeded' ||
    typeof data?.chargeId !== 'string' ||
    typeof data.checkoutKey !== 'string' ||
    !Number.isInteger(data.amountCents)
  ) {
    return undefined;
  }
  return event as PaymentSucceededEvent;
}
