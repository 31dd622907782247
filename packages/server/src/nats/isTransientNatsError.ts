/**
 * nats.js errors that say "the server is unreachable right now" rather than "this message
 * is wrong": lost or closed connections, timeouts, and no responders (no stream listens
 * on the subject yet). Matched by name through the `cause` chain, so two copies of the
 * NATS packages still agree.
 */
const TRANSIENT_NAMES = new Set([
  'ConnectionError',
  'ClosedConnectionError',
  'DrainingConnectionError',
  'TimeoutError',
  'NoRespondersError',
  'RequestError',
]);

/** Node's socket errors when the server is down or the network between is. */
const TRANSIENT_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'CONNECTION_REFUSED',
]);

/** True for a NATS error that a later retry of the same publish may not have. */
export function isTransientNatsError(error: unknown): boolean {
  for (let current = error, depth = 0; current && depth < 8; depth++) {
    if (typeof current !== 'object') return false;
    const { name, code, cause } = current as { name?: unknown; code?: unknown; cause?: unknown };
    if (typeof name === 'string' && TRANSIENT_NAMES.has(name)) return true;
    if (typeof code === 'string' && TRANSIENT_CODES.has(code)) return true;
    current = cause;
  }
  return false;
}
