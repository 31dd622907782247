import { CheckoutPanel } from '@/components/CheckoutPanel';

export default function CheckoutPage() {
  return (
    <>
      <h1>Checkout</h1>
      <p className="lead">
        Turn on some chaos, press Pay, and watch the panel: however many times the request is sent,
        from however many tabs or browsers, the card is charged once.
      </p>
      <CheckoutPanel />
    </>
  );
}
