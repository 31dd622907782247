import { type NextRequest, NextResponse } from 'next/server';
import { PLAIN_COOKIE_OPTIONS, PLAIN_SESSION_COOKIE, validCookie } from './server/plainSession';

/**
 * The plain checkout's session, before its page renders: a browser without the cookie gets
 * one, on this request (so the page and its form see it) and on the response (so every
 * later submission of the form, in any tab, carries it). Server Components cannot set
 * cookies, and the pay form's idempotency scope is this session.
 */
export function proxy(request: NextRequest): NextResponse {
  if (validCookie(request.cookies.get(PLAIN_SESSION_COOKIE)?.value)) return NextResponse.next();
  const sessionId = crypto.randomUUID();
  request.cookies.set(PLAIN_SESSION_COOKIE, sessionId);
  const response = NextResponse.next({ request: { headers: request.headers } });
  response.cookies.set(PLAIN_SESSION_COOKIE, sessionId, PLAIN_COOKIE_OPTIONS);
  return response;
}

export const config = { matcher: ['/checkout/plain'] };
