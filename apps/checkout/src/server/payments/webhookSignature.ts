import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The header that carries a webhook's signature, as the provider sends it:
 * `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, the scheme Stripe uses.
 */
export const WEBHOOK_SIGNATURE_HEADER = 'fakepay-signature';

/** How old a signature may be, in seconds: an older delivery is refused. */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

/** Why a delivery's signature was refused. */
export type SignatureProblem = 'missing' | 'malformed' | 'expired' | 'mismatch';

/** The value of {@link WEBHOOK_SIGNATURE_HEADER} for `body`, signed at `nowSeconds`. */
export function signWebhook(
  body: string,
  secret: string,
  nowSeconds = Math.floor(Date.now() / 1000),
): string {
  return `t=${nowSeconds},v1=${hmac(secret, `${nowSeconds}.${body}`)}`;
}

/**
 * Checks a delivery's signature header against its raw body: null when it is the
 * provider's and recent, else what is wrong with it. Compared in constant time, and
 * within {@link SIGNATURE_TOLERANCE_SECONDS} either way of `nowSeconds`, so a captured
 * delivery cannot be replayed later with its signature.
 */
export function verifyWebhook(
  body: string,
  header: string | null,
  secret: string,
  nowSeconds = Math.floor(Date.now() / 1000),
): SignatureProblem | null {
  if (!header) return 'missing';
  const parts = new Map(
    header.split(',').map((part) => {
      const at = part.indexOf('=');
      return [part.slice(0, at).trim(), part.slice(at + 1).trim()] as const;
    }),
  );
  const timestamp = parts.get('t') ?? '';
  const signature = parts.get('v1') ?? '';
  if (!/^\d{1,12}$/.test(timestamp) || !/^[0-9a-f]{64}$/.test(signature)) return 'malformed';
  if (Math.abs(nowSeconds - Number(timestamp)) > SIGNATURE_TOLERANCE_SECONDS) return 'expired';
  const expected = Buffer.from(hmac(secret, `${timestamp}.${body}`), 'hex');
  return timingSafeEqual(expected, Buffer.from(signature, 'hex')) ? null : 'mismatch';
}

// On globalThis: Next.js may load this module once per bundle, and the provider (in the
// runtime) and the receiver (a route handler) must sign and check with one secret.
const holder = globalThis as { __idemCheckoutWebhookSecret?: string };

/**
 * The secret the provider and the shop share: `PAYMENT_WEBHOOK_SECRET`, or else a random
 * one for this process (the fake provider runs in it, so nothing else needs to know it).
 */
export function webhookSecret(): string {
  const configured = process.env.PAYMENT_WEBHOOK_SECRET;
  if (configured) return configured;
  holder.__idemCheckoutWebhookSecret ??= randomBytes(32).toString('hex');
  return holder.__idemCheckoutWebhookSecret;
}

function hmac(secret: string, payload: string): string {
  return createHmac('sha256', secret).update(payload).digest('hex');
}
