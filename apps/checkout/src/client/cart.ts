import { intentKey } from '@idem/client';
import { useSyncExternalStore } from 'react';

export interface CartItem {
  productId: string;
  quantity: number;
}

const CART_KEY = 'idem-demo-cart';

/**
 * The cart's id: an intent key in localStorage, so every tab of this browser and every
 * reload sees the same cart, and paying it (clear) settles it: the next cart is another
 * intent. The server opens one checkout per (cart id, cart lines).
 */
const cartIntent = () => intentKey({ intent: 'cart', storage: 'local' });

/** This browser's cart id (created with the cart). */
export const cartId = () => cartIntent().get();

/** Whether a checkout was opened for this browser's current cart (and not another's). */
export const isThisCart = (id: string) => cartIntent().peek() === id;
const EMPTY: readonly CartItem[] = [];
const listeners = new Set<() => void>();
let cached: { raw: string | null; items: readonly CartItem[] } = { raw: null, items: EMPTY };

function read(): readonly CartItem[] {
  const raw = localStorage.getItem(CART_KEY);
  if (raw !== cached.raw) {
    let items: readonly CartItem[] = EMPTY;
    try {
      items = raw ? (JSON.parse(raw) as CartItem[]) : EMPTY;
    } catch {
      // A cart from an older version of the demo: start empty.
    }
    cached = { raw, items };
  }
  return cached.items;
}

function write(items: readonly CartItem[]) {
  if (items.length > 0) cartIntent().get();
  else cartIntent().settle();
  localStorage.setItem(CART_KEY, JSON.stringify(items));
  for (const listener of listeners) listener();
}

/** The cart lives in this browser's localStorage: the server only sees it at checkout. */
export function useCart() {
  const items = useSyncExternalStore(
    (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    read,
    () => EMPTY,
  );
  return {
    items,
    count: items.reduce((sum, item) => sum + item.quantity, 0),
    add(productId: string) {
      const current = read();
      const existing = current.find((item) => item.productId === productId);
      write(
        existing
          ? current.map((item) =>
              item.productId === productId ? { ...item, quantity: item.quantity + 1 } : item,
            )
          : [...current, { productId, quantity: 1 }],
      );
    },
    setQuantity(productId: string, quantity: number) {
      write(
        read()
          .map((item) => (item.productId === productId ? { ...item, quantity } : item))
          .filter((item) => item.quantity > 0),
      );
    },
    clear() {
      write(EMPTY);
    },
  };
}
