import { CartSummary } from '@/components/CartSummary';
import { ChaosControls } from '@/components/ChaosControls';
import { CheckoutForm } from '@/components/CheckoutForm';
import { LatestCheckoutPanel } from '@/components/LatestCheckoutPanel';

export default function CheckoutPage() {
  return (
    <>
      <h1>Checkout</h1>
      <p className="lead">
        Turn on some chaos, press Pay, and watch the panel: however many times the request is sent,
        the card is charged once.
      </p>
      <div className="columns">
        <div className="stack">
          <CartSummary />
          <CheckoutForm />
        </div>
        <ChaosControls />
      </div>
      <div style={{ marginTop: 20 }}>
        <LatestCheckoutPanel />
      </div>
    </>
  );
}
