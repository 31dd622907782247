import { intentKey } from '@idem/client';
import { useSyncExternalStore } from 'react';
import { MAX_LINES, MAX_QUANTITY, quantitiesByProduct } from '@/cartLimits';

export interface CartItem {
  productId: string;
  quantity: number;
}

const CART_KEY = 'idem-demo-cart';

/**
 * The cart's id: an intent key in localStorage, so every tab of this browser and every
 * reload sees the same cart, and paying it settles it: the next cart is another
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

/** A stored cart as this version writes it; anything else (an older demo's, edited) is none. */
function parseCart(raw: string | null): readonly CartItem[] {
  if (!raw) return EMPTY;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return EMPTY;
  }
  if (!Array.isArray(parsed)) return EMPTY;
  // One line per product, within the limit: what the server would refuse never gets there.
  const valid = parsed.filter(
    (item): item is CartItem =>
      typeof item === 'object' &&
      item !== null &&
      typeof item.productId === 'string' &&
      Number.isInteger(item.quantity) &&
      item.quantity > 0,
  );
  const items = [...quantitiesByProduct(valid)]
    .slice(0, MAX_LINES)
    .map(([productId, quantity]) => ({ productId, quantity: Math.min(quantity, MAX_QUANTITY) }));
  return items.length === 0 ? EMPTY : items;
}

function read(): readonly CartItem[] {
  const raw = localStorage.getItem(CART_KEY);
  if (raw !== cached.raw) cached = { raw, items: parseCart(raw) };
  return cached.items;
}

/**
 * Stores the cart. Emptying it keeps its id: only paying settles a cart. A cart emptied and
 * filled again (in another tab, say) is still the one cart, whose checkouts the server
 * pays once: a new id would leave a checkout of the old one open in another tab, payable
 * again for the same items.
 */
function write(items: readonly CartItem[]) {
  if (items.length > 0) cartIntent().get();
  localStorage.setItem(CART_KEY, JSON.stringify(items));
  for (const listener of listeners) listener();
}

/** Sets a line's quantity (at most `MAX_QUANTITY`); 0 removes the line. */
function setQuantity(productId: string, quantity: number) {
  write(
    read()
      .map((item) =>
        item.productId === productId
          ? { ...item, quantity: Math.min(quantity, MAX_QUANTITY) }
          : item,
      )
      .filter((item) => item.quantity > 0),
  );
}

/** Keeps only the lines of products in `sold`: the others can no longer be bought. */
function retainProducts(sold: ReadonlySet<string>) {
  write(read().filter((item) => sold.has(item.productId)));
}

/** Tells this tab's listeners about a change, here or (a `storage` event) in another tab. */
function subscribe(listener: () => void) {
  const onStorage = (event: StorageEvent) => {
    if (event.key === CART_KEY || event.key === null) listener();
  };
  listeners.add(listener);
  window.addEventListener('storage', onStorage);
  return () => {
    listeners.delete(listener);
    window.removeEventListener('storage', onStorage);
  };
}

/** The cart lives in this browser's localStorage: the server only sees it at checkout. */
export function useCart() {
  const items = useSyncExternalStore(subscribe, read, () => EMPTY);
  return {
    items,
    count: items.reduce((sum, item) => sum + item.quantity, 0),
    /** Whether one more of the product fits (at most `MAX_QUANTITY`, `MAX_LINES` lines). */
    canAdd(productId: string) {
      const existing = items.find((item) => item.productId === productId);
      return existing ? existing.quantity < MAX_QUANTITY : items.length < MAX_LINES;
    },
    /** One more of the product, unless the cart holds as many as a checkout accepts. */
    add(productId: string) {
      const current = read();
      const existing = current.find((item) => item.productId === productId);
      if (!existing) {
        if (current.length < MAX_LINES) write([...current, { productId, quantity: 1 }]);
        return;
      }
      setQuantity(productId, existing.quantity + 1);
    },
    setQuantity,
    retainProducts,
    /**
     * A checkout of this cart was paid: its lines leave the cart, and what is left (added
     * after that checkout was opened, in this tab or another) becomes a new cart, with a new
     * id, so its checkout is a new one.
     */
    settlePaid(paid: readonly { productId: string; quantity: number }[]) {
      const left = read().flatMap((item) => {
        const bought = paid.find((line) => line.productId === item.productId)?.quantity ?? 0;
        return item.quantity > bought ? [{ ...item, quantity: item.quantity - bought }] : [];
      });
      cartIntent().settle();
      write(left);
    },
  };
}
