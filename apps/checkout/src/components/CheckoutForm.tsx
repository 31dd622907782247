'use client';

import { isTransientError } from '@idem/client';
import { useIdempotencyKey } from '@idem/client/react';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useRouter } from 'next/navigation';
import { useEffect, useRef, useState } from 'react';
import { attemptLog } from '@/client/attemptLog';
import { useCart } from '@/client/cart';
import { describeChaos } from '@/client/chaos';
import { useTRPC } from '@/client/trpc';
import type { CheckoutInput } from '@/server/routers/checkout';
import { useChaos } from './Providers';

export function CheckoutForm() {
  const trpc = useTRPC();
  const router = useRouter();
  const queryClient = useQueryClient();
  const cart = useCart();
  const { chaos } = useChaos();
  const [email, setEmail] = useState('ada@example.com');
  const [cardNumber, setCardNumber] = useState('4242 4242 4242 4242');

  const input: CheckoutInput = {
    items: [...cart.items],
    email,
    cardNumber,
    simulate: { crashAfterCharge: chaos.crashAfterCharge, redeliverEvent: chaos.redeliverEvent },
  };

  // One key per logical checkout: the same on every retry and on a double click, and on
  // "Pay" again after a failure, so the server runs the checkout at most once. A changed
  // request is another checkout and gets a new key (one key with two payloads is a 422).
  const { key, reset } = useIdempotencyKey();
  const request = JSON.stringify(input);
  const lastRequest = useRef(request);
  useEffect(() => {
    if (request === lastRequest.current) return;
    lastRequest.current = request;
    reset();
  }, [request, reset]);

  const pay = useMutation(
    trpc.checkout.pay.mutationOptions({
      trpc: { context: { idempotencyKey: key } },
      retry: false, // keyedRetryLink retries, with the same key
      onSettled: () => queryClient.invalidateQueries({ queryKey: trpc.demo.pathKey() }),
      onSuccess(result) {
        cart.clear();
        reset();
        router.push(`/orders/${result.orderId}?key=${encodeURIComponent(result.checkoutKey)}`);
      },
    }),
  );

  const submit = () => {
    attemptLog.start(key, describeChaos(chaos));
    pay.mutate(input);
    if (chaos.doubleClick) pay.mutate(input);
  };

  const declined = pay.error?.data?.code === 'PAYMENT_REQUIRED';
  return (
    <div className="card" data-testid="checkout-form">
      <h2>Pay</h2>
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
          4242 4242 4242 4242 always pays, 4000 0000 0000 0002 is always declined, any other number
          is declined one time in ten.
        </span>
      </label>
      <button
        type="button"
        className="primary pay"
        onClick={submit}
        disabled={cart.items.length === 0 || pay.isPending}
        data-testid="pay"
      >
        {pay.isPending ? 'Paying…' : 'Pay'}
      </button>
      {cart.items.length === 0 && <p className="hint">The cart is empty.</p>}
      {pay.error && (
        <div className="notice bad" data-testid="pay-error">
          <strong>{declined ? 'Declined. ' : 'Not paid. '}</strong>
          {pay.error.message}{' '}
          {declined
            ? 'The shop stored this answer under the checkout key: Pay again replays it, and nothing is charged.'
            : isTransientError(pay.error)
              ? 'The outcome is unknown after every retry. Pay again is safe: it sends the same key.'
              : ''}
        </div>
      )}
    </div>
  );
}
