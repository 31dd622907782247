import { CartSummary } from '@/components/CartSummary';
import { ProductList } from '@/components/ProductList';

export default function ProductsPage() {
  return (
    <>
      <h1>Products</h1>
      <p className="lead">
        Fill the cart, then pay at checkout with the network, the user and the server misbehaving on
        purpose. The card is charged once, the order written once, the email sent once.
      </p>
      <p className="hint">
        JavaScript off? <a href="/checkout/plain">Check out without JavaScript</a>: a plain HTML
        form with the same guarantee.
      </p>
      <div className="columns">
        <ProductList />
        <CartSummary editable checkoutLink />
      </div>
    </>
  );
}
