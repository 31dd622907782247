'use client';

import { useQuery } from '@tanstack/react-query';
import { useCart } from '@/client/cart';
import { formatCents } from '@/client/format';
import { useTRPC } from '@/client/trpc';

export function ProductList() {
  const trpc = useTRPC();
  const products = useQuery(trpc.shop.products.queryOptions());
  const cart = useCart();
  if (products.error) return <p className="notice bad">{products.error.message}</p>;
  return (
    <div className="products">
      {(products.data ?? []).map((product) => (
        <div className="card product" key={product.id} data-testid={`product-${product.id}`}>
          <div className="swatch" style={{ background: product.color }} />
          <h3>{product.name}</h3>
          <p>{product.description}</p>
          <div className="row">
            <strong>{formatCents(product.priceCents)}</strong>
            <button
              type="button"
              onClick={() => cart.add(product.id)}
              disabled={!cart.canAdd(product.id)}
              title={cart.canAdd(product.id) ? undefined : 'As many as one order can hold'}
            >
              Add to cart
            </button>
          </div>
        </div>
      ))}
    </div>
  );
}
