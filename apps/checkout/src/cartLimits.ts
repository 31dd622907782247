/** The most of one product a cart (and so a checkout) may hold: the server refuses more. */
export const MAX_QUANTITY = 20;

/** The most lines a cart may hold. */
export const MAX_LINES = 20;

/** How many of each product `lines` hold: two lines of one product count together. */
export function quantitiesByProduct(
  lines: readonly { productId: string; quantity: number }[],
): Map<string, number> {
  const quantities = new Map<string, number>();
  for (const line of lines) {
    quantities.set(line.productId, (quantities.get(line.productId) ?? 0) + line.quantity);
  }
  return quantities;
}
