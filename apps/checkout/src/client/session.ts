const SESSION_KEY = 'idem-demo-session';

/**
 * The shopper's anonymous session id, kept in this browser. It is the principal of every
 * idempotency key's scope: another session's key can never replay this one's answers.
 */
export function sessionId(): string {
  let id = localStorage.getItem(SESSION_KEY);
  if (!id) {
    id = crypto.randomUUID();
    localStorage.setItem(SESSION_KEY, id);
  }
  return id;
}
