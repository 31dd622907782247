'use client';

import Link from 'next/link';
import { useCart } from '@/client/cart';

export function CartLink() {
  const { count } = useCart();
  return <Link href="/checkout">Checkout ({count})</Link>;
}
