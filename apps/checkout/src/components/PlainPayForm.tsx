'use client';

import type { IdempotencyKeyFieldProps } from '@idem/server/next';
import { useActionState } from 'react';
import { payPlain } from '@/app/checkout/plain/actions';
import { shortKey } from '@/client/format';
import type { CheckoutView } from '@/server/checkoutIntents';
import type { PlainPayAnswer } from '@/server/plainCheckout';
import { OrderLines } from './OrderLines';

const IDLE: PlainPayAnswer = { status: 'idle' };

/**
 * The plain checkout's pay form. `useActionState` makes it work with JavaScript off too: the
 * browser posts the form, and the answer is this page rendered with the action's state, the
 * confirmation included (so reloading it is the browser sending the POST again).
 */
export function PlainPayForm({
  checkoutId,
  keyField,
  status,
  orderId,
  otherPayment,
  killSwitch,
}: {
  checkoutId: string;
  /** Rendered on the server: `idempotencyKeyField(checkoutId)`. */
  keyField: IdempotencyKeyFieldProps;
  status: CheckoutView['status'];
  orderId: string | null;
  otherPayment: CheckoutView['otherPayment'];
  killSwitch: boolean;
}) {
  const [state, formAction, pending] = useActionState(payPlain, IDLE);
  if (state.status === 'paid') return <PlainConfirmation state={state} />;
  // A declined checkout is settled: its key answers the decline, and another card is
  // another checkout. No Pay here, whose fields (reset to their defaults by the answer)
  // would send the key with other details.
  const declined =
    state.status === 'declined' || (state.status === 'idle' && status === 'declined');
  return (
    <div className="card" data-testid="plain-pay">
      <h2>Pay</h2>
      {state.status === 'idle' && (
        <CheckoutNotice
          checkoutId={checkoutId}
          status={status}
          orderId={orderId}
          otherPayment={otherPayment}
        />
      )}
      <StateNotice state={state} checkoutId={checkoutId} />
      {!declined && (
        <form action={formAction} data-testid="plain-pay-form">
          <input {...keyField} />
          <label className="field">
            Email for the receipt
            <input type="email" name="email" defaultValue="ada@example.com" required />
          </label>
          <label className="field">
            Card number
            <input inputMode="numeric" name="cardNumber" defaultValue="4242 4242 4242 4242" />
            <span className="hint">
              4242 4242 4242 4242 always pays, 4000 0000 0000 0002 is always declined.
            </span>
          </label>
          {killSwitch && (
            <p>
              <label>
                <input type="checkbox" name="kill-after-charge" data-testid="kill-after-charge" />{' '}
                Kill the server right after the charge (SIGKILL; start it again, then reload)
              </label>
            </p>
          )}
          <button type="submit" className="primary pay" data-testid="pay">
            {pending ? 'Paying…' : 'Pay'}
          </button>
        </form>
      )}
    </div>
  );
}

function CheckoutNotice({
  checkoutId,
  status,
  orderId,
  otherPayment,
}: Pick<Parameters<typeof PlainPayForm>[0], 'checkoutId' | 'status' | 'orderId' | 'otherPayment'>) {
  if (otherPayment?.status === 'paid') {
    return (
      <p className="notice warn" data-testid="plain-paid-elsewhere">
        This cart was already paid with another checkout; Pay here charges nothing.
      </p>
    );
  }
  if (status === 'paid' && orderId) {
    return (
      <p className="notice ok" data-testid="plain-already-paid">
        <strong>Already paid</strong> (order {shortKey(orderId)}). Pay again shows the same
        confirmation and charges nothing: <a href={`/orders/${orderId}`}>see the order</a>.
      </p>
    );
  }
  if (status === 'declined') {
    return (
      <p className="notice bad" data-testid="plain-was-declined">
        This checkout was declined; reloading shows that answer again.{' '}
        <a href={`/checkout/plain?checkout=${checkoutId}&retry=1`}>Pay with another card</a>
      </p>
    );
  }
  if (status === 'paying') {
    return (
      <p className="notice warn" data-testid="plain-payment-under-way">
        A payment of this checkout started and has not finished. Pay finds out: it completes or
        replays that one payment.
      </p>
    );
  }
  return null;
}

/** What a person reads for idem's refusals of the pay form (the others keep idem's message). */
const REFUSALS: Partial<Record<string, { title: string; text: string }>> = {
  KEY_MISMATCH: {
    title: 'Already submitted.',
    text:
      'This checkout was submitted before with other details (another card or email), so ' +
      'these were not used: its first submission decides, and nothing more is charged.',
  },
  REQUEST_IN_PROGRESS: {
    title: 'Still running.',
    text: 'A payment of this checkout has not finished yet. Reload in a moment: it shows how it ended.',
  },
};

function StateNotice({ state, checkoutId }: { state: PlainPayAnswer; checkoutId: string }) {
  switch (state.status) {
    case 'declined':
      return (
        <div className="notice bad" data-testid="plain-declined">
          <strong>Declined. </strong>
          {state.message} This answer is stored with the checkout: reloading shows it again.{' '}
          <a href={`/checkout/plain?checkout=${checkoutId}&retry=1`}>Pay with another card</a>
        </div>
      );
    case 'paid-elsewhere':
    case 'invalid':
      return (
        <p className="notice bad" data-testid="plain-error">
          {state.message}
        </p>
      );
    case 'refused': {
      // Never "not paid": a refusal says nothing of how the checkout's payment ended (a
      // KEY_MISMATCH may follow one that charged). Its page does: the link opens it again.
      const refusal = REFUSALS[state.code] ?? {
        title: 'No answer for this submission.',
        text: `${state.message} Nothing is charged twice: the checkout's page says how its payment stands.`,
      };
      return (
        <p className="notice warn" data-testid="plain-error" data-code={state.code}>
          <strong>{refusal.title} </strong>
          {refusal.text}{' '}
          <a href={`/checkout/plain?checkout=${checkoutId}`}>See how this checkout stands</a>
        </p>
      );
    }
    default:
      return null;
  }
}

function PlainConfirmation({ state }: { state: Extract<PlainPayAnswer, { status: 'paid' }> }) {
  return (
    <div
      className="card confirmation"
      data-testid="plain-confirmation"
      data-order-id={state.orderId}
      data-checkout-id={state.checkoutId}
      data-request-id={state.answer?.requestId}
      data-executed-by={state.executedBy}
      data-replayed={String(state.answer?.replayed ?? false)}
    >
      <p className="big">Order {shortKey(state.orderId)} is paid.</p>
      <OrderLines lines={state.lines} totalCents={state.totalCents} />
      <p className="hint">
        Card ending {state.cardLast4}; a confirmation goes to {state.email}.
      </p>
      <p className="notice info" data-testid="plain-answer">
        {state.answer?.replayed
          ? `Replayed: an earlier submission of this form ran the payment${state.attempt > 1 ? ` (attempt ${state.attempt}, after a takeover)` : ''}; this one got its stored result and charged nothing.`
          : `Executed by this submission${state.attempt > 1 ? ` (attempt ${state.attempt}: it took over from one that died after the charge)` : ''}. Reload this page: the browser sends the form again, with the same key, and gets this result back.`}
      </p>
      <p>
        <a href={`/orders/${state.orderId}`}>See the order and what happened</a>
      </p>
    </div>
  );
}
