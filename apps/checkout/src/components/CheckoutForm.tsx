'use client';

import { isOutcomeUnknown } from '@idem/client';
import { useQueryClient } from '@tanstack/react-query';
import type { TRPCClientErrorLike } from '@trpc/client';
import Link from 'next/link';
import { useRouter } from 'next/navigation';
import { useEffect, useRef, useState } from 'react';
import { attemptLog } from '@/client/attemptLog';
import { isThisCart, useCart } from '@/client/cart';
import { describeChaos } from '@/client/chaos';
import { shortKey } from '@/client/format';
import { type PayContext, useTRPC, useTRPCClient } from '@/client/trpc';
import type { CheckoutView } from '@/server/checkoutIntents';
import type { AppRouter } from '@/server/routers/appRouter';
import { useChaos } from './Providers';

type PayError = TRPCClientErrorLike<AppRouter> | Error;

/**
 * Pay for one checkout. The key is the checkout (the server derives it from the id), so
 * every press, retry, reload, tab and browser that pays this checkout sends the same key:
 * the card is charged at most once, and a late payer gets the one order.
 */
export function CheckoutForm({
  checkout,
  switchTo,
  hold,
}: {
  checkout: CheckoutView | undefined;
  switchTo: (view: CheckoutView) => void;
  /** Keeps the page on this checkout while its payment is out or its outcome unknown. */
  hold: (held: boolean) => void;
}) {
  const trpc = useTRPC();
  const client = useTRPCClient();
  const router = useRouter();
  const queryClient = useQueryClient();
  const cart = useCart();
  const { chaos } = useChaos();
  const [email, setEmail] = useState('ada@example.com');
  const [cardNumber, setCardNumber] = useState('4242 4242 4242 4242');
  const [paying, setPaying] = useState(false);
  /** Set at once, where `paying` waits for a render: submits in one task send one Pay. */
  const submitting = useRef(false);
  const [error, setError] = useState<PayError | null>(null);
  /** The order a Pay just paid, while the page moves to it: Pay stays gone meanwhile. */
  const [opening, setOpening] = useState<string | null>(null);

  // Paid (here, in another tab or in another browser): what it bought leaves this browser's
  // cart, once (the cart then gets a new id, so no other tab removes it again).
  const paid = checkout?.status === 'paid' ? checkout : null;
  useEffect(() => {
    if (paid && cart.items.length > 0 && isThisCart(paid.cartId)) cart.settlePaid(paid.lines);
  }, [paid, cart]);

  // Another checkout shown (the cart changed, or another tab paid this one): an error of
  // the last one's Pay no longer describes it.
  const checkoutId = checkout?.id;
  useEffect(() => {
    if (checkoutId !== undefined && !submitting.current) setError(null);
  }, [checkoutId]);

  const submit = async () => {
    if (!checkout || submitting.current) return;
    submitting.current = true;
    setPaying(true);
    setError(null);
    hold(true);
    let paidOrder: string | undefined;
    let paySent = false;
    try {
      // The details go with the checkout; once a payment started they are frozen and this
      // changes nothing. After a decline, another card comes back as a new checkout.
      const target = await client.checkout.prepare
        .mutate({
          checkoutId: checkout.id,
          email,
          cardNumber,
          simulate: {
            crashAfterCharge: chaos.crashAfterCharge,
            redeliverEvent: chaos.redeliverEvent,
          },
        })
        .catch((failure: unknown) => {
          // Nothing is charged before Pay is sent: a lost answer here is no unknown outcome.
          throw isOutcomeUnknown(failure) ? new PayNotSentError(failure as Error) : failure;
        });
      if (target.id !== checkout.id) switchTo(target);
      const key = target.id;
      const calls = chaos.doubleClick ? 2 : 1;
      const chaosInWords = describeChaos(chaos);
      // A double click: two calls at once, each with its own retries, one key.
      paySent = true;
      const answers = await Promise.allSettled(
        Array.from({ length: calls }, () => {
          const context: PayContext = {
            idempotencyKey: key,
            demoCall: attemptLog.startCall(key, chaosInWords),
          };
          return client.checkout.pay.mutate({ checkoutId: key }, { context: { ...context } });
        }),
      );
      // Both calls are over before the page moves on, so the panel shows how each ended.
      const answered = answers.find((answer) => answer.status === 'fulfilled');
      if (!answered) {
        throw mostTelling(
          answers.map((answer) => (answer as PromiseRejectedResult).reason as PayError),
        );
      }
      const result = answered.value;
      const already = !attemptLog.ranHere(key);
      paidOrder = result.orderId;
      setOpening(result.orderId);
      router.push(`/orders/${result.orderId}${already ? '?already=1' : ''}`);
      // Paid from a link in another browser, this browser's own cart is another one.
      if (isThisCart(target.cartId)) cart.settlePaid(target.lines);
    } catch (failure) {
      setError(failure as PayError);
      // Pay never sent, or declined (settled: another card is another checkout): the page
      // follows the cart again. Any other answer keeps it on this checkout, whose notice
      // says what became of it (paid or being paid through another checkout, say).
      if (!paySent || declined(failure)) hold(false);
    } finally {
      // Paid: Pay stays disabled until the order's page replaces this one.
      submitting.current = paidOrder !== undefined;
      setPaying(paidOrder !== undefined);
      queryClient.invalidateQueries({ queryKey: trpc.checkout.pathKey() });
      queryClient.invalidateQueries({ queryKey: trpc.demo.pathKey() });
    }
  };

  const status = checkout?.status;
  return (
    <div className="card" data-testid="checkout-form">
      <h2>Pay</h2>
      {/* While this tab's own Pay is out or ended without an answer, Pay stays: it finds out. */}
      {checkout?.otherPayment && (status === 'open' || status === 'declined') && !paying ? (
        <div className="notice warn" data-testid="paid-elsewhere">
          {checkout.otherPayment.status === 'paid' ? (
            <>
              <strong>This cart was already paid</strong> with another checkout (before Back, or in
              another tab). A cart is paid once, so nothing here is charged.{' '}
              {checkout.otherPayment.orderId && (
                <Link href={`/orders/${checkout.otherPayment.orderId}?already=1`}>
                  See the order
                </Link>
              )}
            </>
          ) : (
            <>
              <strong>Another checkout of this cart is being paid</strong> (before Back, or in
              another tab). A cart is paid once.{' '}
              <a href={`/checkout?checkout=${checkout.otherPayment.checkoutId}`}>Follow that one</a>
            </>
          )}
        </div>
      ) : opening ? (
        <div className="notice ok" data-testid="paid-opening">
          <strong>Paid.</strong> Opening order {shortKey(opening)}…{' '}
          <Link href={`/orders/${opening}`}>See the order</Link>
        </div>
      ) : status === 'paid' && checkout?.orderId && !paying && !error ? (
        <div className="notice ok" data-testid="already-paid">
          <strong>Already paid.</strong> This cart's checkout was paid (from this tab, another tab
          or another browser): order {shortKey(checkout.orderId)}. Nothing more will be charged.{' '}
          <Link href={`/orders/${checkout.orderId}?already=1`}>See the order</Link>
        </div>
      ) : (
        <form
          // The shop's own rules answer (the server's messages), the same in every browser.
          noValidate
          onSubmit={(event) => {
            // Enter in a field pays, as the button does (a disabled Pay sends nothing).
            event.preventDefault();
            if (checkout && !paying) void submit();
          }}
        >
          <label className="field">
            Email for the receipt
            <input
              type="email"
              value={email}
              onChange={(event) => setEmail(event.target.value)}
              name="email"
            />
          </label>
          <label className="field">
            Card number
            <input
              inputMode="numeric"
              value={cardNumber}
              onChange={(event) => setCardNumber(event.target.value)}
              name="cardNumber"
            />
            <span className="hint">
              4242 4242 4242 4242 always pays, 4000 0000 0000 0002 is always declined, any other
              number is declined one time in ten.
            </span>
          </label>
          {status === 'paying' && !paying && (
            <p className="notice warn" data-testid="payment-under-way">
              A payment of this checkout started earlier (before a reload, or in another tab or
              browser) and has not finished. Pay finds out: it sends the same key, so it completes
              or replays that one payment and never charges twice.
            </p>
          )}
          <button
            type="submit"
            className="primary pay"
            disabled={!checkout || paying}
            data-testid="pay"
          >
            {paying ? 'Paying…' : 'Pay'}
          </button>
        </form>
      )}
      {error && <PayErrorNotice error={error} />}
    </div>
  );
}

function declined(error: unknown): boolean {
  return (error as { data?: { code?: string } } | null)?.data?.code === 'PAYMENT_REQUIRED';
}

/** `checkout.prepare` got no answer: Pay was never sent, so nothing can have been charged. */
class PayNotSentError extends Error {
  override readonly name = 'PayNotSentError';
  constructor(readonly failure: Error) {
    super(failure.message, { cause: failure });
  }
}

/** Of a double click's two failures, the one that says most: a decision beats "unknown". */
function mostTelling(errors: PayError[]): PayError | undefined {
  return errors.find((error) => !isOutcomeUnknown(error)) ?? errors[0];
}

function PayErrorNotice({ error }: { error: PayError }) {
  const code = 'data' in error ? error.data?.code : undefined;
  const message = /[.!?]$/.test(error.message) ? error.message : `${error.message}.`;
  if (code === 'PAYMENT_REQUIRED') {
    return (
      <div className="notice bad" data-testid="pay-error">
        <strong>Declined. </strong>
        {message} The shop stored this answer with the checkout: Pay again replays it, and nothing
        is charged. Another card number starts a new checkout for this cart.
      </div>
    );
  }
  if (error instanceof PayNotSentError) {
    return (
      <div className="notice bad" data-testid="pay-error" data-outcome="not-sent">
        <strong>Not paid. </strong>
        The shop could not be reached ({message.replace(/\.$/, '')}), so no payment was started and
        nothing was charged. Check the connection and press Pay again.
      </div>
    );
  }
  if (isOutcomeUnknown(error)) {
    return (
      <div className="notice warn" data-testid="pay-error" data-outcome="unknown">
        <strong>Outcome unknown. </strong>
        No answer came back ({message.replace(/\.$/, '')}): the card may have been charged and the
        order placed, or not. Pay again finds out: it sends the same checkout key, so it gets the
        stored result of a payment that went through, or makes the one payment, and never charges
        twice. That payment keeps the card and email it started with: what is typed here now is not
        used for it.
      </div>
    );
  }
  return (
    <div className="notice bad" data-testid="pay-error">
      <strong>Not paid. </strong>
      {message}
    </div>
  );
}
