import { formatCents } from '@/client/format';
import type { OrderLine } from '@/server/db/schema';

/**
 * An order's lines and its total, as the plain checkout's cart and the confirmation of
 * either checkout show them (`totalLabel`: "Total charged" once paid, "Total" before).
 */
export function OrderLines({
  lines,
  totalCents,
  totalLabel = 'Total charged',
  totalTestId,
}: {
  lines: readonly OrderLine[];
  totalCents: number;
  totalLabel?: string;
  totalTestId?: string;
}) {
  return (
    <table className="lines">
      <tbody>
        {lines.map((line) => (
          <tr key={line.productId}>
            <td>{line.name}</td>
            <td className="num">× {line.quantity}</td>
            <td className="num">{formatCents(line.priceCents * line.quantity)}</td>
          </tr>
        ))}
        <tr className="total" data-testid={totalTestId}>
          <td>{totalLabel}</td>
          <td />
          <td className="num">{formatCents(totalCents)}</td>
        </tr>
      </tbody>
    </table>
  );
}
