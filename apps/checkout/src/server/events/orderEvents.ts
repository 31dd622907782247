import { defineEvents } from '@idem/server/outbox';
import { z } from 'zod';

/** The events the shop publishes through its outbox. */
export const orderEvents = defineEvents({
  'order.paid': z.object({
    orderId: z.string(),
    checkoutKey: z.string(),
    email: z.string(),
    totalCents: z.number().int(),
  }),
});

export type OrderPaid = z.infer<(typeof orderEvents.schemas)['order.paid']>;

/**
 * Event header that makes the demo deliver an event twice (the "redeliver" chaos
 * switch): at-least-once delivery does that on its own now and then.
 */
export const REDELIVER_HEADER = 'demo-redeliver';
