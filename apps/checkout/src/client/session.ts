const SESSION_KEY = 'idem-demo-session';

/**
 * The shopper's anonymous session id, kept in this browser. It names the shopper: the
 * checkouts this browser opens are this session's, and their payments are keyed under it
 * (the principal of Pay's idempotency scope), whichever browser holds the link and pays.
 */
export function sessionId(): string {
  let id = localStorage.getItem(SESSION_KEY);
  if (!id) {
    id = crypto.randomUUID();
    localStorage.setItem(SESSION_KEY, id);
  }
  return id;
}
