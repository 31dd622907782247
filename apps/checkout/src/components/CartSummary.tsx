'use client';

import { useQuery } from '@tanstack/react-query';
import Link from 'next/link';
import { useCart } from '@/client/cart';
import { formatCents } from '@/client/format';
import { useTRPC } from '@/client/trpc';

/** The cart's lines and total, priced from the catalogue (the server prices it again). */
export function CartSummary({
  editable = false,
  checkoutLink = false,
}: {
  editable?: boolean;
  checkoutLink?: boolean;
}) {
  const trpc = useTRPC();
  const products = useQuery(trpc.shop.products.queryOptions());
  const cart = useCart();
  const byId = new Map((products.data ?? []).map((product) => [product.id, product]));
  const lines = cart.items.flatMap((item) => {
    const product = byId.get(item.productId);
    return product ? [{ ...item, product }] : [];
  });
  const total = lines.reduce((sum, line) => sum + line.product.priceCents * line.quantity, 0);

  return (
    <div className="card" data-testid="cart">
      <h2>Your cart</h2>
      {lines.length === 0 ? (
        <p className="hint">Empty. Add something from the products.</p>
      ) : (
        <table className="lines">
          <tbody>
            {lines.map((line) => (
              <tr key={line.productId}>
                <td>{line.product.name}</td>
                <td className="num qty">
                  {editable && (
                    <button
                      type="button"
                      aria-label={`One less ${line.product.name}`}
                      onClick={() => cart.setQuantity(line.productId, line.quantity - 1)}
                    >
                      −
                    </button>
                  )}{' '}
                  × {line.quantity}{' '}
                  {editable && (
                    <button
                      type="button"
                      aria-label={`One more ${line.product.name}`}
                      onClick={() => cart.setQuantity(line.productId, line.quantity + 1)}
                    >
                      +
                    </button>
                  )}
                </td>
                <td className="num">{formatCents(line.product.priceCents * line.quantity)}</td>
              </tr>
            ))}
            <tr className="total">
              <td>Total</td>
              <td />
              <td className="num" data-testid="cart-total">
                {formatCents(total)}
              </td>
            </tr>
          </tbody>
        </table>
      )}
      {checkoutLink && lines.length > 0 && (
        <Link href="/checkout" className="button primary pay">
          Go to checkout
        </Link>
      )}
    </div>
  );
}
