/**
 * SQLSTATEs with which the server ends the session, outside class 08 (connection
 * exception): `admin_shutdown` (`pg_terminate_backend`, a fast shutdown), `crash_shutdown`,
 * `cannot_connect_now`, `database_dropped`, `idle_session_timeout`,
 * `idle_in_transaction_session_timeout` and `transaction_timeout`. All are FATAL: the
 * backend exits after sending them. (`57014`, a cancelled statement, leaves the session
 * open and is not one of them.)
 */
const SESSION_ENDING_STATES = new Set([
  '57P01',
  '57P02',
  '57P03',
  '57P04',
  '57P05',
  '25P03',
  '25P04',
]);

/**
 * The codes postgres.js gives the errors of a connection it no longer has (its
 * `ConnectionError`): the socket closed under a statement, the connection was ended or
 * destroyed with statements pending, or it could not be opened in time.
 */
const DRIVER_CONNECTION_CODES = new Set([
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
]);

/**
 * Socket errors that drivers hand on as they are (postgres.js rejects the statements in
 * flight with the socket's own error): the connection is gone or was never made.
 */
const SOCKET_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * node-postgres's own errors for a connection it no longer has carry no code, only these
 * messages: the socket ended under a statement or while connecting, the connect timed out,
 * or a statement went to a client whose connection failed or was ended. (Its pool's
 * "timeout exceeded when trying to connect" is not one: that is a pool with no free client.)
 */
const NODE_POSTGRES_CONNECTION_MESSAGES = new Set([
  'Connection terminated unexpectedly',
  'Connection terminated',
  'Connection terminated due to connection timeout',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
]);

/** How far down a chain of causes to look; Drizzle wraps a driver's error once. */
const MAX_CAUSE_DEPTH = 5;

/** Whether `error` or an error in its chain of causes has a string `code` that `test` accepts. */
function someCode(error: unknown, test: (code: string) => boolean): boolean {
  return someError(error, ({ code }) => typeof code === 'string' && test(code));
}

/**
 * `error` and the errors of its chain of causes, as far as they are objects, at most
 * `MAX_CAUSE_DEPTH` of them (Drizzle wraps a driver's error once, in a `DrizzleQueryError`).
 */
export function* causeChain(
  error: unknown,
): Generator<{ code?: unknown; message?: unknown; severity?: unknown; cause?: unknown }> {
  let current = error;
  for (let depth = 0; depth < MAX_CAUSE_DEPTH; depth++) {
    if (typeof current !== 'object' || current === null) return;
    yield current;
    current = (current as { cause?: unknown }).cause;
  }
}

/** Whether `error` or an error in its chain of causes is one that `test` accepts. */
function someError(
  error: unknown,
  test: (error: { code?: unknown; message?: unknown; severity?: unknown }) => boolean,
): boolean {
  for (const link of causeChain(error)) if (test(link)) return true;
  return false;
}

/** Whether `error` or one of its causes carries the SQLSTATE `code` (Drizzle wraps driver errors). */
export function hasCode(error: unknown, code: string): boolean {
  return someCode(error, (found) => found === code);
}

/**
 * Whether `error` or one of its causes is an error the server answered with: a SQLSTATE
 * (five digits or upper-case letters) with the severity the server gave it, as every
 * driver passes it on, not one of the driver's or the socket's own errors.
 */
export function fromServer(error: unknown): boolean {
  return someError(
    error,
    ({ code, severity }) =>
      typeof code === 'string' && SQLSTATE.test(code) && typeof severity === 'string',
  );
}

const SQLSTATE = /^[0-9A-Z]{5}$/;

/**
 * Whether `error`, or an error in its chain of causes (Drizzle wraps a driver's error in a
 * `DrizzleQueryError` whose `cause` it is), says that the connection the statement ran on
 * is gone: a connection exception (SQLSTATE class 08), a session the server ended (see
 * `SESSION_ENDING_STATES`), or the driver's or the socket's own connection error.
 *
 * After such an error nothing more may be sent on that connection: the server has already
 * ended its transaction and released its session's locks, and postgres.js, given a
 * statement for a connection whose socket has closed, throws from a timer (an
 * `uncaughtException` that takes the process down) instead of rejecting the statement.
 */
export function isConnectionError(error: unknown): boolean {
  return (
    someCode(
      error,
      (code) =>
        (code.length === 5 && code.startsWith('08')) ||
        SESSION_ENDING_STATES.has(code) ||
        DRIVER_CONNECTION_CODES.has(code) ||
        SOCKET_CODES.has(code),
    ) ||
    someError(
      error,
      ({ code, message }) =>
        code === undefined &&
        typeof message === 'string' &&
        NODE_POSTGRES_CONNECTION_MESSAGES.has(message),
    )
  );
}

/**
 * Whether `error` (or one of its causes) is `25006` (read_only_sql_transaction): a write
 * sent on a connection to a server that takes no writes, such as a standby a multi-host
 * pool reached before it was promoted. The session is still open (this is no connection
 * error: a transaction it ends is not parked on it), but a fenced write that met it may
 * be sent again, on another connection or once the server is promoted.
 */
export function reachedReadOnlyServer(error: unknown): boolean {
  return hasCode(error, '25006');
}
