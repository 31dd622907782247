import { idempotencyKeyField } from '@idem/server/next';
import { asc } from 'drizzle-orm';
import Link from 'next/link';
import { redirect } from 'next/navigation';
import { MAX_QUANTITY } from '@/cartLimits';
import { formatCents } from '@/client/format';
import { OrderLines } from '@/components/OrderLines';
import { PlainPayForm } from '@/components/PlainPayForm';
import { findCheckout, findCheckoutView, openCheckout } from '@/server/checkoutIntents';
import { type OrderLine, products } from '@/server/db/schema';
import { killSwitchEnabled, PLAIN_CART_PROBLEMS } from '@/server/plainCheckout';
import { getRuntime } from '@/server/runtime';
import { openPlainCart } from './actions';

export const dynamic = 'force-dynamic';

const CHECKOUT_ID = /^co_[0-9a-f-]{36}$/;

type SearchParams = Promise<Record<string, string | string[] | undefined>>;

/**
 * The checkout without JavaScript: a Server Component with plain forms. Without
 * `?checkout=`, a cart form (products and quantities) that opens the checkout; with it,
 * the checkout's lines and the pay form, whose hidden key field is the checkout's id.
 */
export default async function PlainCheckoutPage({ searchParams }: { searchParams: SearchParams }) {
  const { checkout: id, problem, retry } = await searchParams;
  if (typeof id !== 'string') {
    return <PlainCart problem={typeof problem === 'string' ? problem : undefined} />;
  }
  const { db } = await getRuntime();
  const view = CHECKOUT_ID.test(id) ? await findCheckoutView(db, id) : undefined;
  if (!view) {
    return (
      <>
        <h1>Checkout without JavaScript</h1>
        <p className="notice bad" data-testid="no-checkout">
          There is no checkout {id}. <Link href="/checkout/plain">Choose the products again</Link>.
        </p>
      </>
    );
  }
  if (view.status === 'declined' && retry === '1') {
    // Another card: the next checkout of the same cart (the declined one keeps its answer).
    const row = await findCheckout(db, id);
    if (row) redirect(`/checkout/plain?checkout=${(await openCheckout(db, row)).id}`);
  }
  return (
    <>
      <h1>Checkout without JavaScript</h1>
      <p className="lead">
        A plain HTML form posted to a Server Action. Its hidden key is this checkout&apos;s id, so a
        double click, Enter pressed twice, a reload of the answer, Back and Pay again, or a second
        tab all pay once.
      </p>
      <div className="columns">
        <div className="stack">
          <Lines lines={view.lines} totalCents={view.totalCents} checkoutId={view.id} />
          <PlainPayForm
            checkoutId={view.id}
            keyField={idempotencyKeyField(view.id)}
            status={view.status}
            orderId={view.orderId}
            otherPayment={view.otherPayment}
            killSwitch={killSwitchEnabled()}
          />
        </div>
      </div>
    </>
  );
}

function Lines({
  lines,
  totalCents,
  checkoutId,
}: {
  lines: readonly OrderLine[];
  totalCents: number;
  checkoutId: string;
}) {
  return (
    <div className="card" data-testid="plain-lines" data-checkout-id={checkoutId}>
      <h2>Your order</h2>
      <OrderLines
        lines={lines}
        totalCents={totalCents}
        totalLabel="Total"
        totalTestId="plain-total"
      />
      <p className="hint">
        Checkout <code>{checkoutId}</code>: the key every submission of this form carries.
      </p>
    </div>
  );
}

/** The cart as a form: no localStorage without JavaScript, so the server opens the checkout. */
async function PlainCart({ problem }: { problem: string | undefined }) {
  const { db } = await getRuntime();
  const catalogue = await db.select().from(products).orderBy(asc(products.id));
  const message =
    problem && Object.hasOwn(PLAIN_CART_PROBLEMS, problem)
      ? PLAIN_CART_PROBLEMS[problem as keyof typeof PLAIN_CART_PROBLEMS]
      : undefined;
  return (
    <>
      <h1>Checkout without JavaScript</h1>
      <p className="lead">
        Choose how many of each, then continue: the server opens the checkout of this cart (the same
        one for the same products, in any tab) and the next page pays it with a plain form.
      </p>
      {message && (
        <p className="notice bad" data-testid="plain-problem">
          {message}
        </p>
      )}
      <form action={openPlainCart} className="card" data-testid="plain-cart">
        <table className="lines">
          <tbody>
            {catalogue.map((product) => (
              <tr key={product.id}>
                <td>
                  <label htmlFor={`qty-${product.id}`}>{product.name}</label>
                </td>
                <td className="num">{formatCents(product.priceCents)}</td>
                <td className="num">
                  <input
                    id={`qty-${product.id}`}
                    name={`qty-${product.id}`}
                    type="number"
                    min={0}
                    max={MAX_QUANTITY}
                    defaultValue={0}
                    style={{ width: '4.5em' }}
                  />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        <button type="submit" className="primary" data-testid="plain-continue">
          Continue to payment
        </button>
      </form>
    </>
  );
}
