'use client';

import { useQuery } from '@tanstack/react-query';
import Link from 'next/link';
import { MAX_QUANTITY } from '@/cartLimits';
import { useCart } from '@/client/cart';
import { formatCents } from '@/client/format';
import { useTRPC } from '@/client/trpc';
import type { OrderLine } from '@/server/db/schema';

interface Line {
  productId: string;
  name: string;
  quantity: number;
  priceCents: number;
}

/**
 * Without `lines`: this browser's cart, priced from the catalogue (editable on the products
 * page). With `lines`: a checkout's lines as the server priced them, which is what Pay
 * charges, whichever browser shows it.
 */
export function CartSummary({
  editable = false,
  checkoutLink = false,
  lines: checkoutLines,
  note = null,
  checkoutId = null,
}: {
  editable?: boolean;
  checkoutLink?: boolean;
  lines?: readonly OrderLine[];
  note?: string | null;
  checkoutId?: string | null;
}) {
  const trpc = useTRPC();
  const products = useQuery(trpc.shop.products.queryOptions());
  const cart = useCart();
  const byId = new Map((products.data ?? []).map((product) => [product.id, product]));
  const lines: readonly Line[] =
    checkoutLines ??
    cart.items.flatMap((item) => {
      const product = byId.get(item.productId);
      return product ? [{ ...item, name: product.name, priceCents: product.priceCents }] : [];
    });
  const total = lines.reduce((sum, line) => sum + line.priceCents * line.quantity, 0);

  return (
    <div className="card" data-testid="cart">
      <h2>{checkoutLines ? 'What you pay for' : 'Your cart'}</h2>
      {lines.length === 0 ? (
        <p className="hint">{note ?? 'Empty. Add something from the products.'}</p>
      ) : (
        <table className="lines">
          <tbody>
            {lines.map((line) => (
              <tr key={line.productId}>
                <td>{line.name}</td>
                <td className="num qty">
                  {editable && (
                    <button
                      type="button"
                      aria-label={`One less ${line.name}`}
                      onClick={() => cart.setQuantity(line.productId, line.quantity - 1)}
                    >
                      −
                    </button>
                  )}{' '}
                  × {line.quantity}{' '}
                  {editable && (
                    <button
                      type="button"
                      aria-label={`One more ${line.name}`}
                      title={
                        line.quantity >= MAX_QUANTITY
                          ? `At most ${MAX_QUANTITY} of one product per order`
                          : undefined
                      }
                      disabled={line.quantity >= MAX_QUANTITY}
                      onClick={() => cart.setQuantity(line.productId, line.quantity + 1)}
                    >
                      +
                    </button>
                  )}
                </td>
                <td className="num">{formatCents(line.priceCents * line.quantity)}</td>
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
      {editable && lines.some((line) => line.quantity >= MAX_QUANTITY) && (
        <p className="hint" data-testid="quantity-limit">
          At most {MAX_QUANTITY} of one product per order.
        </p>
      )}
      {checkoutId && (
        <p className="share" data-testid="checkout-link">
          This checkout, payable from any browser:{' '}
          <a href={`/checkout?checkout=${checkoutId}`}>
            <code>/checkout?checkout={checkoutId}</code>
          </a>
        </p>
      )}
      {checkoutLink && lines.length > 0 && (
        <Link href="/checkout" className="button primary pay">
          Go to checkout
        </Link>
      )}
    </div>
  );
}
