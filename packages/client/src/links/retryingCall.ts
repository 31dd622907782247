import {
  type Operation,
  type OperationResultObservable,
  type OperationResultObserver,
  TRPCClientError,
} from '@trpc/client';
import type { AnyRouter } from '@trpc/server';
import type { Unsubscribable } from '@trpc/server/observable';
import { decideRetry, toClientError } from './decideRetry.js';
import type { RetrySettings } from './KeyedRetryLinkOptions.js';

// One call through keyedRetryLink, as a state machine: `Call.state` is its one mutable
// value, and `decideRetry` decides what follows a failed attempt.

type Timer = ReturnType<typeof setTimeout>;

/** What a call has spent of the budget, carried from each state to the next. */
interface Ledger {
  /** The tokens the last retry took: a success after it refunds them in full. */
  retryCost: number | undefined;
  /** Whether a reply came and the budget was credited for it (once a call). */
  credited: boolean;
}

/** Attempt `attempt` is in flight, unanswered; `attemptTimer` bounds its wait. */
interface Waiting {
  status: 'waiting';
  attempt: number;
  ledger: Ledger;
  subscription: Unsubscribable | undefined;
  attemptTimer: Timer | undefined;
}

/** Where one call stands. */
type CallState =
  | Waiting
  /** Attempt `attempt` answered: its envelopes are passed on until it completes. */
  | {
      status: 'replying';
      attempt: number;
      ledger: Ledger;
      subscription: Unsubscribable | undefined;
    }
  /** Attempt `attempt` failed (or timed out): `decideRetry` is deciding what comes next. */
  | { status: 'deciding'; attempt: number; ledger: Ledger }
  /** Attempt `attempt` failed: the next is sent when `timer` fires, unless the call ends first. */
  | {
      status: 'sleeping';
      attempt: number;
      ledger: Ledger;
      timer: Timer;
      stopListeningForAbort: () => void;
    }
  /** Completed, failed or unsubscribed: nothing more happens. */
  | { status: 'ended' };

/** What a call through the link is given. */
export interface RetryingCallInput<TRouter extends AnyRouter> {
  op: Operation;
  next: (op: Operation) => OperationResultObservable<TRouter, unknown>;
  observer: OperationResultObserver<TRouter, unknown>;
  settings: RetrySettings<TRouter>;
}

/** One call through the link: what it was given, and `state`, its one mutable value. */
interface Call<TRouter extends AnyRouter> extends Readonly<RetryingCallInput<TRouter>> {
  readonly deadlineAt: number;
  state: CallState;
}

/** Sends the call's first attempt; returns the teardown that cancels the call. */
export function startRetryingCall<TRouter extends AnyRouter>(
  input: RetryingCallInput<TRouter>,
): () => void {
  const first = waiting(1, { retryCost: undefined, credited: false });
  const deadlineAt = Date.now() + input.settings.deadlineMs;
  const call: Call<TRouter> = { ...input, deadlineAt, state: first };
  send(call, first);
  return () => stop(call);
}

const waiting = (attempt: number, ledger: Ledger): Waiting => ({
  status: 'waiting',
  attempt,
  ledger,
  subscription: undefined,
  attemptTimer: undefined,
});

/** Whether `state` is attempt `attempt` in flight: its events count only then. */
function isLive(
  state: CallState,
  attempt: number,
): state is Extract<CallState, { status: 'waiting' | 'replying' }> {
  return (state.status === 'waiting' || state.status === 'replying') && state.attempt === attempt;
}

/** Sends `attempt`, and bounds its wait by `attemptTimeoutMs`. */
function send<TRouter extends AnyRouter>(call: Call<TRouter>, attempt: Waiting): void {
  call.state = attempt;
  const subscription = call.next(call.op).subscribe({
    next: (envelope) => onReply(call, attempt.attempt, envelope),
    error: (error) => {
      const { state } = call;
      if (!isLive(state, attempt.attempt)) return;
      if (state.status === 'waiting') clearTimeout(state.attemptTimer);
      onAttemptFailed(call, state, error);
    },
    complete: () => {
      const { state } = call;
      if (!isLive(state, attempt.attempt)) return;
      if (state.status === 'waiting') clearTimeout(state.attemptTimer);
      call.state = { status: 'ended' };
      call.observer.complete();
    },
  });
  keep(call, attempt.attempt, subscription);
}

/**
 * Records the subscription of `attempt`, to cancel it on unsubscribe, and starts its timer
 * unless it already answered: a terminating link may answer synchronously, inside
 * `subscribe`.
 */
function keep<TRouter extends AnyRouter>(
  call: Call<TRouter>,
  attempt: number,
  subscription: Unsubscribable,
): void {
  const { state } = call;
  if (!isLive(state, attempt)) return;
  if (state.status === 'replying') {
    call.state = { ...state, subscription };
    return;
  }
  const attemptTimer = startAttemptTimer(call, state, subscription);
  call.state = { ...state, subscription, attemptTimer };
}

function onReply<TRouter extends AnyRouter>(
  call: Call<TRouter>,
  attempt: number,
  envelope: Parameters<OperationResultObserver<TRouter, unknown>['next']>[0],
): void {
  const { state } = call;
  if (!isLive(state, attempt)) return;
  if (state.status === 'waiting') {
    clearTimeout(state.attemptTimer);
    // A success after retries refunds the last retry's cost in full (as in the
    // AWS SDKs' standard mode); one without retries adds `successRefund`.
    if (!state.ledger.credited) call.settings.budget?.recordSuccess(state.ledger.retryCost);
    const ledger = { ...state.ledger, credited: true };
    call.state = { status: 'replying', attempt, ledger, subscription: state.subscription };
  }
  call.observer.next(envelope);
}

function startAttemptTimer<TRouter extends AnyRouter>(
  call: Call<TRouter>,
  { attempt, ledger }: Waiting,
  subscription: Unsubscribable,
): Timer | undefined {
  const { attemptTimeoutMs, linkName } = call.settings;
  if (!Number.isFinite(attemptTimeoutMs)) return undefined;
  return setTimeout(() => {
    if (!isLive(call.state, attempt)) return;
    // Leave `waiting` first: tRPC's observables still deliver what a cancelled request
    // reports (httpLink's AbortError), which must not count.
    call.state = { status: 'deciding', attempt, ledger };
    // Unsubscribing cancels the request (httpLink aborts its fetch).
    subscription.unsubscribe();
    const timedOut = new DOMException(
      `${linkName}: no reply within attemptTimeoutMs (${attemptTimeoutMs} ms); ` +
        'the attempt was aborted and its outcome is unknown.',
      'TimeoutError',
    );
    onAttemptFailed(call, { attempt, ledger }, TRPCClientError.from<TRouter>(timedOut));
  }, attemptTimeoutMs);
}

/** Attempt `attempt` failed: ends the call, or pays for a retry and sleeps before it. */
function onAttemptFailed<TRouter extends AnyRouter>(
  call: Call<TRouter>,
  { attempt, ledger }: { attempt: number; ledger: Ledger },
  error: TRPCClientError<TRouter>,
): void {
  call.state = { status: 'deciding', attempt, ledger };
  const { op, settings } = call;
  const failed = { op, error, attempt, now: Date.now(), deadlineAt: call.deadlineAt };
  const decision = decideRetry(failed, settings.policy);
  if (hasEnded(call)) return; // the caller unsubscribed inside `retryOn`
  if (decision.kind !== 'retry') {
    end(call, decision.error);
    return;
  }

  const { charge } = decision;
  // decideRetry saw that the budget holds the charge, and nothing has run since.
  if (charge) settings.budget?.tryAcquire(charge.retryKind);
  const paid = charge ? { ...ledger, retryCost: charge.cost } : ledger;
  try {
    settings.onRetry?.({ op, attempt, delayMs: decision.delayMs, error });
  } catch (thrown) {
    end(call, toClientError(thrown));
    return;
  }
  if (hasEnded(call)) return; // the caller unsubscribed inside `onRetry`
  sleepThenSend(call, attempt, paid, decision.delayMs);
}

/**
 * Sleeps `delayMs`, then sends the attempt after `attempt`; the caller's abort ends the
 * sleep, or the call at once if it came while the retry was decided (in `retryOn` or
 * `onRetry`).
 */
function sleepThenSend<TRouter extends AnyRouter>(
  call: Call<TRouter>,
  attempt: number,
  ledger: Ledger,
  delayMs: number,
): void {
  const { signal } = call.op;
  const aborted = () =>
    end(
      call,
      toClientError(signal?.reason ?? new DOMException('This operation was aborted', 'AbortError')),
    );
  if (signal?.aborted) {
    aborted();
    return;
  }
  const onAbort = () => {
    clearTimeout(timer);
    aborted();
  };
  const stopListeningForAbort = () => signal?.removeEventListener('abort', onAbort);
  const timer = setTimeout(() => {
    stopListeningForAbort();
    send(call, waiting(attempt + 1, ledger));
  }, delayMs);
  signal?.addEventListener('abort', onAbort, { once: true });
  call.state = { status: 'sleeping', attempt, ledger, timer, stopListeningForAbort };
}

/** Whether the call ended: read anew after running the caller's code, which may unsubscribe. */
const hasEnded = (call: Call<AnyRouter>) => call.state.status === 'ended';

/** Fails the call with `error`. */
function end<TRouter extends AnyRouter>(
  call: Call<TRouter>,
  error: TRPCClientError<TRouter>,
): void {
  call.state = { status: 'ended' };
  call.observer.error(error);
}

/** The caller unsubscribed (or the call ended): clears what the state holds. */
function stop<TRouter extends AnyRouter>(call: Call<TRouter>): void {
  const { state } = call;
  call.state = { status: 'ended' };
  if (state.status === 'waiting') clearTimeout(state.attemptTimer);
  if (state.status === 'waiting' || state.status === 'replying') state.subscription?.unsubscribe();
  if (state.status === 'sleeping') {
    clearTimeout(state.timer);
    state.stopListeningForAbort();
  }
}
