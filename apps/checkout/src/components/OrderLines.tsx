import { formatCents } from '@/client/format';
import type { OrderLine } from '@/server/db/schema';

/** An order's lines and the total charged, as the confirmation of either checkout shows them. */
export function OrderLines({ lines, totalCents }: { lines: OrderLine[]; totalCents: number }) {
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
        <tr className="total">
          <td>Total charged</td>
          <td />
          <td className="num">{formatCents(totalCents)}</td>
        </tr>
      </tbody>
    </table>
  );
}
