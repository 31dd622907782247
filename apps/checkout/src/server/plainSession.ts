/**
 * The plain checkout's cookies: the browser's session (set by `src/proxy.ts` before the
 * page renders, so every tab and every submission of the page carries it) and its plain
 * cart's id (set when the cart's checkout is opened). No imports: the proxy loads this.
 */
export const PLAIN_SESSION_COOKIE = 'idem-plain-session';
export const PLAIN_CART_COOKIE = 'idem-plain-cart';
const COOKIE_VALUE = /^[A-Za-z0-9-]{8,64}$/;

/** A cookie's value if it is one this shop could have set, else `undefined`. */
export function validCookie(value: string | undefined): string | undefined {
  return value !== undefined && COOKIE_VALUE.test(value) ? value : undefined;
}

/** How the shop sets both cookies: for the whole site, a year, never read by scripts. */
export const PLAIN_COOKIE_OPTIONS = {
  httpOnly: true,
  sameSite: 'lax',
  path: '/',
  maxAge: 365 * 24 * 60 * 60,
} as const;
