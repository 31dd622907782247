import { type IdempotentConsumer, idempotentConsumer } from '@idem/server/outbox';
import { sql } from 'drizzle-orm';
import type { AppDatabase } from '../db/openDatabase';
import { emails, eventDeliveries } from '../db/schema';
import type { OrderPaid } from './orderEvents';

export const CONFIRMATION_EMAIL_CONSUMER = 'confirmation-email';

type Transaction = Parameters<Parameters<AppDatabase['transaction']>[0]>[0];

/** The consumer's own write: one email row, through the inbox's transaction. */
export async function writeConfirmationEmail(
  tx: Transaction,
  event: { id: string; payload: OrderPaid },
): Promise<void> {
  const { orderId, totalCents, email } = event.payload;
  await tx.insert(emails).values({
    orderId,
    eventId: event.id,
    recipient: email,
    subject: `Order ${orderId.slice(0, 8)} is paid: €${(totalCents / 100).toFixed(2)}`,
  });
}

/**
 * Records a delivery for the "What happened" panel, after the inbox decided (its email
 * row, written by the first delivery, names the order).
 */
export async function recordDelivery(
  db: AppDatabase,
  eventId: string,
  outcome: 'processed' | 'duplicate',
): Promise<void> {
  await db.execute(sql`
    insert into ${eventDeliveries} (event_id, order_id, outcome)
    select ${emails.eventId}, ${emails.orderId}, ${outcome} from ${emails}
    where ${emails.eventId} = ${eventId}
    limit 1`);
}

/** The "send confirmation email" consumer: deduplicated by event id in idem's inbox. */
export function confirmationEmails(db: AppDatabase): {
  inbox: IdempotentConsumer<AppDatabase>;
  deliver: (event: { id: string; payload: OrderPaid }) => Promise<void>;
} {
  const inbox = idempotentConsumer({ db, name: CONFIRMATION_EMAIL_CONSUMER });
  return {
    inbox,
    async deliver(event) {
      const result = await inbox.handle(event, (tx) => writeConfirmationEmail(tx, event));
      // After the inbox transaction, on `db`: nothing of it is open any more.
      await recordDelivery(db, event.id, result.status);
    },
  };
}
