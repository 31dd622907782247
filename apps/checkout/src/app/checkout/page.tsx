import { Suspense } from 'react';
import { CheckoutPanel } from '@/components/CheckoutPanel';

export default function CheckoutPage() {
  return (
    <>
      <h1>Checkout</h1>
      <p className="lead">
        Turn on some chaos, press Pay, and watch the panel: however many times the request is sent,
        from however many tabs or browsers, the card is charged once.
      </p>
      {/* The panel reads the link's ?checkout= in the browser. */}
      <Suspense fallback={<p className="hint">Opening the checkout…</p>}>
        <CheckoutPanel />
      </Suspense>
    </>
  );
}
