import { isOutcomeUnknown } from '@idem/client';
import { skipToken, useQuery, useQueryClient } from '@tanstack/react-query';
import { useSearchParams } from 'next/navigation';
import { useCallback, useEffect, useRef, useState } from 'react';
import { quantitiesByProduct } from '@/cartLimits';
import type { CheckoutView } from '@/server/checkoutIntents';
import { type CartItem, cartId, isThisCart, useCart } from './cart';
import { useTRPC, useTRPCClient } from './trpc';

/** Sets one query parameter without a navigation (Next.js keeps its router in step). */
export function replaceSearchParam(name: string, value: string) {
  const url = new URL(window.location.href);
  url.searchParams.set(name, value);
  window.history.replaceState(null, '', url);
}

export interface CheckoutState {
  checkout: CheckoutView | undefined;
  /** Why there is no checkout: the cart is empty, or opening it failed. */
  problem: string | null;
  /** Pay got another checkout to pay (a new card after a decline). */
  switchTo: (view: CheckoutView) => void;
  /**
   * `true` while this page's Pay is out, or ended with its outcome unknown: the page stays
   * on that checkout however the cart changes (in another tab, or as a paid cart settles),
   * so what it says is about the payment that may have been made.
   */
  hold: (held: boolean) => void;
  /**
   * The page shows an unpaid checkout of this browser's cart whose lines are no longer
   * the cart's (Back after adding to the cart, or the cart changed in another tab): Pay
   * pays the lines shown, not the cart.
   */
  cartChanged: boolean;
}

/**
 * The checkout this page pays: the one its link names (`?checkout=co_…`, after a reload,
 * Back, or in another browser), or else the one the server opens for this browser's cart
 * (the same for every tab on the same cart version). Its id goes into the link at once, so
 * a reload stays on it.
 */
export function useCheckout(): CheckoutState {
  const trpc = useTRPC();
  const client = useTRPCClient();
  const queryClient = useQueryClient();
  const cart = useCart();
  /** undefined until the link was read (in the browser); null: the link names none. */
  const [linked, setLinked] = useState<string | null | undefined>(undefined);
  const [opened, setOpened] = useState<string | null>(null);
  /** The checkout this page opened and put in its link itself. */
  const shown = useRef<string | null>(null);
  /** Counts the page's visits to its link: each one without a checkout opens the cart's. */
  const [visit, setVisit] = useState(0);
  const [problem, setProblem] = useState<string | null>(null);
  /** The cart's lines when Pay took hold of the checkout; null while Pay holds nothing. */
  const heldItems = useRef<string | null>(null);

  // An empty `?checkout=` names none: the cart's checkout opens.
  const linkParam = useSearchParams().get('checkout') || null;
  useEffect(() => {
    // The page's own replaceState (below) changes nothing; a navigation to another link
    // (the header's Checkout, a pasted link) shows what that link names.
    if (linkParam !== null && linkParam === shown.current) return;
    shown.current = null;
    setOpened(null);
    setProblem(null);
    setLinked(linkParam);
    setVisit((count) => count + 1);
  }, [linkParam]);

  const show = useCallback(
    (view: CheckoutView) => {
      queryClient.setQueryData(trpc.checkout.get.queryKey({ checkoutId: view.id }), view);
      shown.current = view.id;
      setOpened(view.id);
      setLinked(null);
      replaceSearchParam('checkout', view.id);
    },
    [queryClient, trpc],
  );

  const items = JSON.stringify(cart.items);
  const itemsNow = useRef(items);
  itemsNow.current = items;
  const hold = useCallback((held: boolean) => {
    if (held) {
      heldItems.current = itemsNow.current;
      return;
    }
    const before = heldItems.current;
    heldItems.current = null;
    // The cart changed while Pay held the checkout: open the cart's checkout now.
    if (before !== null && before !== itemsNow.current) setVisit((count) => count + 1);
  }, []);
  useEffect(() => {
    // Not before the link was read (visit 0), nor while it names a checkout or Pay holds it.
    if (visit === 0 || linked !== null || heldItems.current !== null) return;
    const cartItems = JSON.parse(items) as typeof cart.items;
    // An emptied cart (just paid) keeps the page on its checkout.
    if (cartItems.length === 0) return;
    let current = true;
    client.checkout.open.mutate({ cartId: cartId(), items: [...cartItems] }).then(
      (view) => {
        if (current) show(view);
      },
      (error: Error) => {
        if (current) setProblem(`The checkout could not be opened: ${error.message}`);
      },
    );
    return () => {
      current = false;
    };
  }, [linked, items, client, show, visit]);

  const checkoutId = linked ?? opened;
  const query = useQuery(
    trpc.checkout.get.queryOptions(checkoutId ? { checkoutId } : skipToken, {
      // A link to a checkout that does not exist (404) or is malformed (400) is answered
      // at once, and is not asked again; a failure that got no decision (the network, a
      // 5xx: `isOutcomeUnknown`) is.
      retry: (failures, error) => failures < 1 && isOutcomeUnknown(error),
      // Another tab or browser may pay it: watch it until it is settled.
      refetchInterval: (q) => {
        if (q.state.error && !isOutcomeUnknown(q.state.error)) return false;
        return q.state.data?.status === 'paid' || q.state.data?.status === 'declined'
          ? 5_000
          : 1_000;
      },
    }),
  );

  const empty = linked === null && !opened && cart.items.length === 0;
  const checkout = query.data;
  return {
    checkout,
    problem: query.error?.message ?? problem ?? (empty ? 'The cart is empty.' : null),
    switchTo: show,
    hold,
    cartChanged:
      checkout !== undefined &&
      checkout.status !== 'paid' &&
      checkout.otherPayment === null &&
      cart.items.length > 0 &&
      isThisCart(checkout.cartId) &&
      !sameLines(checkout.lines, cart.items),
  };
}

function sameLines(lines: readonly CartItem[], items: readonly CartItem[]): boolean {
  const ordered = quantitiesByProduct(lines);
  const held = quantitiesByProduct(items);
  return (
    ordered.size === held.size &&
    [...ordered].every(([productId, quantity]) => held.get(productId) === quantity)
  );
}
