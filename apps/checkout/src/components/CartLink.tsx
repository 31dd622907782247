'use client';

import { useQuery } from '@tanstack/react-query';
import Link from 'next/link';
import { useEffect } from 'react';
import { useCart } from '@/client/cart';
import { useTRPC } from '@/client/trpc';

/**
 * The header's way to the checkout, with the cart's size. On every page, so it is also
 * where a cart holding a product the shop no longer sells (a cart saved before the
 * catalogue changed) loses it, instead of blocking the checkout.
 */
export function CartLink() {
  const trpc = useTRPC();
  const products = useQuery(trpc.shop.products.queryOptions());
  const cart = useCart();
  const { count, items, retainProducts } = cart;
  useEffect(() => {
    if (!products.data) return;
    const sold = new Set(products.data.map((product) => product.id));
    if (items.some((item) => !sold.has(item.productId))) retainProducts(sold);
  }, [products.data, items, retainProducts]);
  return <Link href="/checkout">Checkout ({count})</Link>;
}
