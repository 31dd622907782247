'use client';

import { skipToken, useQuery } from '@tanstack/react-query';
import Link from 'next/link';
import { formatCents, shortKey } from '@/client/format';
import { useTRPC } from '@/client/trpc';
import { WhatHappened } from './WhatHappened';

export function OrderConfirmation({
  orderId,
  checkoutKey,
}: {
  orderId: string;
  checkoutKey: string | null;
}) {
  const trpc = useTRPC();
  const checkout = useQuery(
    trpc.demo.checkout.queryOptions(checkoutKey ? { key: checkoutKey } : skipToken),
  );
  const order = checkout.data?.orders.find((candidate) => candidate.id === orderId);
  return (
    <>
      <h1>Thank you</h1>
      <p className="lead">
        <Link href="/">Back to the products</Link> to try another checkout with more chaos.
      </p>
      <div className="stack">
        <div className="card confirmation" data-testid="confirmation">
          <p className="big">Order {shortKey(orderId)} is paid.</p>
          {order && (
            <table className="lines">
              <tbody>
                {order.lines.map((line) => (
                  <tr key={line.productId}>
                    <td>{line.name}</td>
                    <td className="num">× {line.quantity}</td>
                    <td className="num">{formatCents(line.priceCents * line.quantity)}</td>
                  </tr>
                ))}
                <tr className="total">
                  <td>Total charged</td>
                  <td />
                  <td className="num">{formatCents(order.totalCents)}</td>
                </tr>
              </tbody>
            </table>
          )}
          {order && <p className="hint">A confirmation goes to {order.email}.</p>}
        </div>
        <WhatHappened checkoutKey={checkoutKey} />
      </div>
    </>
  );
}
