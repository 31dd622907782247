'use server';

import { IDEMPOTENCY_KEY_FIELD, idempotentAction } from '@idem/server/next';
import { cookies } from 'next/headers';
import { redirect } from 'next/navigation';
import { findCheckout } from '@/server/checkoutIntents';
import {
  KILL_FIELD,
  openPlainCheckout,
  type PlainPayAnswer,
  type PlainPayState,
  payPlainCheckout,
  plainPaymentForm,
  quantitiesOf,
  UnknownProductError,
} from '@/server/plainCheckout';
import {
  PLAIN_CART_COOKIE,
  PLAIN_COOKIE_OPTIONS,
  PLAIN_SESSION_COOKIE,
  validCookie,
} from '@/server/plainSession';
import { CHECKOUT_LEASE_MS } from '@/server/routers/checkout';
import { getRuntime } from '@/server/runtime';

/** The browser's plain session (the proxy gave it one before the page rendered). */
async function plainSession(): Promise<string | undefined> {
  return validCookie((await cookies()).get(PLAIN_SESSION_COOKIE)?.value);
}

/**
 * Pay, keyed by the form's hidden `idempotency-key` field: the checkout's id, rendered with
 * the form. Every submission of a form for this checkout (a double click, Enter twice, the
 * browser resending the POST, Back and submit, another tab) carries that key under this
 * browser's session, so the first runs and the others get its stored state. A duplicate
 * that comes while the first still runs waits for it (up to 10 s) and replays it.
 */
const pay = idempotentAction(
  {
    // The runtime's store once it has started (this module loads before the database is open).
    store: async () => (await getRuntime()).store,
    name: 'checkout/pay-plain',
    scope: async () => `session:${(await plainSession()) ?? 'none'}`,
    mode: 'lease',
    leaseMs: CHECKOUT_LEASE_MS,
    // A refusal is a state the form shows (409 still running, 422 other details, …).
    onRefusal: (refusal): PlainPayState => ({
      status: 'refused',
      code: refusal.code ?? String(refusal.status),
      message: refusal.message,
    }),
  },
  async (idempotency, _previous: PlainPayAnswer, form: FormData, requestId: string) => {
    const details = plainPaymentForm.parse({
      email: form.get('email'),
      cardNumber: form.get('cardNumber'),
    });
    const state = await payPlainCheckout(await getRuntime(), idempotency, {
      checkoutId: idempotency.key,
      details,
      kill: form.get(KILL_FIELD) === 'on',
    });
    // Stored with the state: a replay tells by it that another request ran the payment.
    return { ...state, executedBy: requestId };
  },
);

/**
 * The pay form's action (`useActionState`: the previous state, then the form). What can be
 * checked without claiming the key is checked first, so a mistake fixed and sent again is
 * not a second use of the key with other input.
 */
export async function payPlain(previous: PlainPayAnswer, form: FormData): Promise<PlainPayAnswer> {
  const requestId = crypto.randomUUID();
  const checkoutId = form.get(IDEMPOTENCY_KEY_FIELD);
  if (typeof checkoutId !== 'string' || !/^co_[0-9a-f-]{36}$/.test(checkoutId)) {
    return { status: 'invalid', message: 'This form names no checkout: open the checkout again.' };
  }
  const details = plainPaymentForm.safeParse({
    email: form.get('email'),
    cardNumber: form.get('cardNumber'),
  });
  if (!details.success) {
    const messages = new Set(details.error.issues.map((issue) => issue.message));
    return { status: 'invalid', message: [...messages].join(' ') };
  }
  if (!(await plainSession())) {
    return {
      status: 'invalid',
      message: 'Your browser sent no session cookie: allow cookies for this shop and reload.',
    };
  }
  if (!(await findCheckout((await getRuntime()).db, checkoutId))) {
    return { status: 'invalid', message: `No checkout ${checkoutId}: open the checkout again.` };
  }
  let state: PlainPayAnswer;
  try {
    state = await pay(previous, form, requestId);
  } catch (error) {
    if (!(error instanceof Error) || error.name !== 'CartBeingPaidError') throw error;
    return { status: 'refused', code: 'CART_BEING_PAID', message: error.message };
  }
  const replayed = state.executedBy !== undefined && state.executedBy !== requestId;
  return { ...state, answer: { requestId, replayed } };
}

/**
 * The plain cart's form: opens the checkout of the chosen products for this browser's
 * session and cart (the same checkout for the same products, in any tab), then shows it.
 */
export async function openPlainCart(form: FormData): Promise<void> {
  const jar = await cookies();
  const sessionId = validCookie(jar.get(PLAIN_SESSION_COOKIE)?.value);
  const quantities = quantitiesOf(form);
  if (typeof quantities === 'string') redirect(`/checkout/plain?problem=${quantities}`);
  if (!sessionId) redirect('/checkout/plain?problem=cookies');
  const cartId = validCookie(jar.get(PLAIN_CART_COOKIE)?.value) ?? `plain-${crypto.randomUUID()}`;
  let opened: Awaited<ReturnType<typeof openPlainCheckout>> | undefined;
  try {
    opened = await openPlainCheckout((await getRuntime()).db, { sessionId, cartId, quantities });
  } catch (error) {
    if (!(error instanceof UnknownProductError)) throw error;
  }
  if (!opened) redirect('/checkout/plain?problem=product');
  jar.set(PLAIN_CART_COOKIE, opened.cartId, PLAIN_COOKIE_OPTIONS);
  redirect(`/checkout/plain?checkout=${opened.checkoutId}`);
}
