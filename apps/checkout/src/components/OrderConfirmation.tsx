'use client';

import { useQuery } from '@tanstack/react-query';
import Link from 'next/link';
import { shortKey } from '@/client/format';
import { useTRPC } from '@/client/trpc';
import { OrderLines } from './OrderLines';
import { WhatHappened } from './WhatHappened';

/** An order's page: read from the database by the order's id, in any browser that has the link. */
export function OrderConfirmation({ orderId, already }: { orderId: string; already: boolean }) {
  const trpc = useTRPC();
  const query = useQuery(trpc.checkout.order.queryOptions({ orderId }));
  const order = query.data;
  return (
    <>
      <h1>{order ? 'Thank you' : 'Order'}</h1>
      <p className="lead">
        <Link href="/">Back to the products</Link> to try another checkout with more chaos.
      </p>
      <div className="stack">
        <div className="card confirmation" data-testid="confirmation">
          {query.isPending ? (
            <p className="hint">Loading order {shortKey(orderId)}…</p>
          ) : !order ? (
            <p className="big" data-testid="no-order">
              {query.error
                ? `Order ${shortKey(orderId)} could not be loaded: ${query.error.message}`
                : `There is no order ${shortKey(orderId)}.`}
            </p>
          ) : (
            <>
              <p className="big">Order {shortKey(order.id)} is paid.</p>
              {already && (
                <p className="notice ok" data-testid="already-paid">
                  <strong>Already paid.</strong> This cart's checkout had been paid before (from
                  another tab, another browser, or an attempt whose answer was lost): your Pay got
                  this order, and nothing was charged again.
                </p>
              )}
              <OrderLines lines={order.lines} totalCents={order.totalCents} />
              <p className="hint">A confirmation goes to {order.email}.</p>
            </>
          )}
        </div>
        {order && <WhatHappened checkoutKey={order.checkoutKey} />}
      </div>
    </>
  );
}
