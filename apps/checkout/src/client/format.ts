const euros = new Intl.NumberFormat('en-IE', { style: 'currency', currency: 'EUR' });

export const formatCents = (cents: number) => euros.format(cents / 100);

/** The first and last characters of a key: enough to tell keys apart at a glance. */
export const shortKey = (key: string) =>
  key.length > 14 ? `${key.slice(0, 8)}…${key.slice(-4)}` : key;
