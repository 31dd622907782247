import { sql } from 'drizzle-orm';
import type { AppDatabase } from '../db/openDatabase';
import { providerPayments } from '../db/schema';
import { deliverWebhook } from './deliverWebhook';
import type { PaymentSucceededEvent } from './paymentEvents';

/** Always succeeds (as at real providers' test modes). */
export const SUCCEEDING_CARD = '4242424242424242';
/** Always declined: the deterministic business "no" for tests and the demo. */
export const DECLINING_CARD = '4000000000000002';

export interface ChargeRequest {
  /** The provider deduplicates on it: the same key never charges twice. */
  idempotencyKey: string;
  /** Metadata, as real providers allow: which checkout this charge belongs to. */
  checkoutKey: string;
  amountCents: number;
  cardNumber: string;
}

export interface Charge {
  chargeId: string;
  amountCents: number;
  cardLast4: string;
}

/** The provider said no. Nothing was charged; the same key gets the same answer. */
export class CardDeclinedError extends Error {
  override readonly name = 'CardDeclinedError';
  constructor(readonly declineCode: string) {
    super(
      declineCode === 'insufficient_funds'
        ? 'Your card was declined: insufficient funds.'
        : 'Your card was declined.',
    );
  }
}

/**
 * By name and field, not `instanceof`: Next.js may load this module once per bundle
 * (instrumentation, route handlers), so the class that threw may be another copy.
 */
export function isCardDeclinedError(error: unknown): error is CardDeclinedError {
  return (
    error instanceof Error &&
    error.name === 'CardDeclinedError' &&
    typeof (error as { declineCode?: unknown }).declineCode === 'string'
  );
}

export interface FakePaymentProviderOptions {
  db: AppDatabase;
  /**
   * Share of cards other than the two test cards that are declined at random.
   * @default 0.1
   */
  randomDeclineRate?: number;
  /**
   * The provider's response time, drawn uniformly from this range.
   * @default [150, 500]
   */
  latencyMs?: readonly [number, number];
  /**
   * Where the provider sends a `payment.succeeded` webhook after each new charge (and then
   * sends it again: see `deliverWebhook`).
   * @default undefined (no webhooks)
   */
  webhookUrl?: string;
}

/**
 * A payment provider with the behaviour of a real one, in this process: latency, an
 * occasional decline, and its own idempotency on the key the shop sends (a retried charge
 * request with the same key answers with the first outcome and moves no money). Its
 * ledger is the `provider_payments` table, which the demo shows as "provider charges".
 */
export function fakePaymentProvider(options: FakePaymentProviderOptions) {
  const { db } = options;
  const randomDeclineRate = options.randomDeclineRate ?? 0.1;
  const [minLatencyMs, maxLatencyMs] = options.latencyMs ?? [150, 500];

  return {
    async charge(request: ChargeRequest): Promise<Charge> {
      const latencyMs = minLatencyMs + Math.random() * (maxLatencyMs - minLatencyMs);
      await new Promise((resolve) => setTimeout(resolve, latencyMs));

      const digits = request.cardNumber.replace(/\D/g, '');
      const declineCode =
        digits === DECLINING_CARD
          ? 'card_declined'
          : digits !== SUCCEEDING_CARD && Math.random() < randomDeclineRate
            ? 'insufficient_funds'
            : null;
      // One statement: a new key records its outcome, a known key only counts the request
      // and returns the outcome it got the first time.
      const [payment] = await db
        .insert(providerPayments)
        .values({
          id: `ch_${crypto.randomUUID().replaceAll('-', '').slice(0, 16)}`,
          idempotencyKey: request.idempotencyKey,
          checkoutKey: request.checkoutKey,
          amountCents: request.amountCents,
          cardLast4: digits.slice(-4),
          outcome: declineCode ? 'declined' : 'charged',
          declineCode,
        })
        .onConflictDoUpdate({
          target: providerPayments.idempotencyKey,
          set: { requests: sql`${providerPayments.requests} + 1` },
        })
        .returning();
      if (!payment) throw new Error('provider: the payment was not recorded');
      if (payment.amountCents !== request.amountCents) {
        throw new Error('provider: idempotency key reused with different parameters');
      }
      if (payment.outcome === 'declined') {
        throw new CardDeclinedError(payment.declineCode ?? 'card_declined');
      }
      // A new charge (not a repeated request for one) is announced by webhook, after the
      // answer, as a provider does: the shop hears of it on another connection.
      if (options.webhookUrl && payment.requests === 1) {
        const webhookUrl = options.webhookUrl;
        const event: PaymentSucceededEvent = {
          id: `evt_${crypto.randomUUID().replaceAll('-', '').slice(0, 20)}`,
          type: 'payment.succeeded',
          data: {
            chargeId: payment.id,
            checkoutKey: payment.checkoutKey,
            amountCents: payment.amountCents,
          },
        };
        setTimeout(() => {
          deliverWebhook(db, webhookUrl, event).catch(() => undefined);
        }, 0);
      }
      return {
        chargeId: payment.id,
        amountCents: payment.amountCents,
        cardLast4: payment.cardLast4,
      };
    },
  };
}

export type FakePaymentProvider = ReturnType<typeof fakePaymentProvider>;
