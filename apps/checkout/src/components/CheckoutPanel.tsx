'use client';

import { useCheckout } from '@/client/useCheckout';
import { CartSummary } from './CartSummary';
import { ChaosControls } from './ChaosControls';
import { CheckoutForm } from './CheckoutForm';
import { WhatHappened } from './WhatHappened';

/** The checkout page's client side: the checkout being paid, its form, chaos and panel. */
export function CheckoutPanel() {
  const { checkout, problem, switchTo, hold, cartChanged } = useCheckout();
  return (
    <>
      {cartChanged && (
        <p className="notice warn" data-testid="cart-changed">
          Your cart has changed since this checkout was opened. Pay pays only what is listed here;
          the rest stays in the cart. <a href="/checkout">Check out the whole cart</a>
        </p>
      )}
      <div className="columns">
        <div className="stack">
          <CartSummary
            lines={checkout?.lines ?? []}
            note={problem ?? (checkout ? null : 'Opening the checkout…')}
            checkoutId={checkout?.id ?? null}
          />
          <CheckoutForm checkout={checkout} switchTo={switchTo} hold={hold} />
          {checkout && (
            <p className="hint" data-testid="plain-checkout-link">
              <a href={`/checkout/plain?checkout=${checkout.id}`}>Pay without JavaScript</a>: the
              same checkout as a plain HTML form.
            </p>
          )}
        </div>
        <ChaosControls />
      </div>
      <div className="below">
        <WhatHappened checkoutKey={checkout?.id ?? null} />
      </div>
    </>
  );
}
