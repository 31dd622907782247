'use client';

import { skipToken, useQuery } from '@tanstack/react-query';
import { Fragment, useSyncExternalStore } from 'react';
import { type Attempt, attemptLog, type CheckoutRun } from '@/client/attemptLog';
import { formatCents, shortKey } from '@/client/format';
import { useTRPC } from '@/client/trpc';

/**
 * "What happened" for one checkout: what the browser sent (every attempt of the key, from
 * the attempt log) next to what the database holds (charges, orders, emails, key record).
 */
export function WhatHappened({ checkoutKey }: { checkoutKey: string | null }) {
  const trpc = useTRPC();
  // Runs are replaced, never changed in place: the snapshot is the run itself.
  const run = useSyncExternalStore(
    attemptLog.subscribe,
    () => attemptLog.run(checkoutKey),
    () => undefined,
  );
  const server = useQuery(
    trpc.demo.checkout.queryOptions(checkoutKey ? { key: checkoutKey } : skipToken, {
      // Fast while the checkout is under way (the email follows through the outbox), then
      // slowly, in case another tab or a late delivery adds something.
      refetchInterval: (query) =>
        query.state.data?.key?.status === 'completed' &&
        (query.state.data.emails.length > 0 || query.state.data.orders.length === 0)
          ? 3_000
          : 600,
    }),
  );

  if (!checkoutKey) {
    return (
      <div className="card panel" data-testid="what-happened">
        <h2>What happened</h2>
        <p className="subtitle">
          Press Pay: every request it sends, and what the database ends up holding, shows up here.
        </p>
      </div>
    );
  }
  const chaosSeen = run
    ? run.chaos.join(', ') || 'none'
    : 'not seen here (no request of this checkout was sent from this tab)';

  const data = server.data;
  const charged = data?.charges.filter((charge) => charge.outcome === 'charged') ?? [];
  const declines = data?.charges.filter((charge) => charge.outcome === 'declined') ?? [];
  const orders = data?.orders ?? [];
  const emails = data?.emails ?? [];
  const deliveries = data ? data.deliveries.processed + data.deliveries.duplicate : 0;

  return (
    <div className="card panel" data-testid="what-happened" data-key={checkoutKey}>
      <h2>What happened</h2>
      <p className="subtitle">
        Checkout <code data-testid="checkout-key">{shortKey(checkoutKey)}</code>: its id is the key
        of every attempt below · chaos: {chaosSeen}
      </p>

      <div className="tiles">
        <Tile
          name="charges"
          label="Provider charges"
          count={charged.length}
          none={declines.length > 0 ? 'declined: nothing charged' : 'none yet'}
          detail={
            charged[0]
              ? `${charged[0].id} · ${formatCents(charged[0].amountCents)} · card …${charged[0].cardLast4} · the provider was asked ${requests(charged[0].requests)}`
              : declines[0]
                ? `the provider said no (${declines[0].declineCode}) and was asked ${requests(declines[0].requests)}`
                : ''
          }
        />
        <Tile
          name="orders"
          label="Orders"
          count={orders.length}
          none={declines.length > 0 ? 'none: not paid' : 'none yet'}
          detail={
            orders[0] ? `${shortKey(orders[0].id)} · ${formatCents(orders[0].totalCents)}` : ''
          }
        />
        <Tile
          name="emails"
          label="Confirmation emails"
          count={emails.length}
          none={
            orders.length > 0
              ? 'waiting for the outbox relay…'
              : declines.length > 0
                ? 'none: no order'
                : 'none yet'
          }
          detail={
            emails[0]
              ? `to ${emails[0].recipient} · order.paid delivered ${deliveries}×${data && data.deliveries.duplicate > 0 ? `, ${data.deliveries.duplicate} duplicate skipped by the inbox` : ''}`
              : ''
          }
        />
        <Tile
          name="webhooks"
          label="Payment webhooks handled"
          count={data?.webhooks.confirmations ?? 0}
          none={charged.length > 0 ? 'waiting for the provider…' : 'none yet'}
          detail={
            data && data.webhooks.deliveries > 0
              ? `the provider delivered ${data.webhooks.deliveries}×${data.webhooks.replayed > 0 ? `, ${data.webhooks.replayed} answered from the store (Idempotent-Replayed)` : ''}`
              : ''
          }
        />
      </div>

      <div className="scroll">
        <table className="attempts" data-testid="attempts">
          <thead>
            <tr>
              <th>#</th>
              <th>sent</th>
              <th>outcome</th>
              <th>what it means</th>
              <th>next</th>
            </tr>
          </thead>
          <tbody>
            {run && <AttemptRows run={run} />}
            {!run?.attempts.length && (
              <tr>
                <td colSpan={5} className="hint">
                  {run
                    ? 'Sending…'
                    : data?.key
                      ? 'No request of this checkout was sent from this tab: the attempts were seen by the tab or browser that paid; the database side is above.'
                      : 'Nothing sent yet.'}
                </td>
              </tr>
            )}
          </tbody>
        </table>
      </div>

      {data?.key && (
        <p className="keyline" data-testid="key-record">
          Key record on the server: <strong>{data.key.status.replace('_', ' ')}</strong>
          {data.key.leaseEnded &&
            ', its lease over (released, or its holder stopped): the next Pay takes it over'}{' '}
          · claimed{' '}
          {data.key.attempts === 1
            ? 'once'
            : `${data.key.attempts}× (taken over ${data.key.attempts - 1}× after a lease ran out)`}{' '}
          · recovery points:{' '}
          {data.key.recoveryPoints.length ? data.key.recoveryPoints.join(', ') : 'none'}
        </p>
      )}
      {declines.length > 0 && charged.length === 0 ? (
        <p className="legend">
          The provider said no. The shop stored that answer under the key, so sending the same
          request again replays it: the provider is not asked again and nothing is charged. Another
          card is another request, with a new key.
        </p>
      ) : (
        <p className="legend">
          Every attempt carried the same key, so the server ran the checkout once: a retry got the
          stored answer (<em>replayed</em>) or, while the first attempt still held the key,{' '}
          <em>409 in progress</em>. The charge is a recovery point with a key derived for the
          provider, so a takeover after a crash does not charge again; the email consumer skips
          events it already handled; and the provider's webhook is keyed by its event id, so its
          redelivery is answered from the store.
        </p>
      )}
    </div>
  );
}

function requests(count: number) {
  return count === 1 ? 'once' : `${count}× (it deduplicated by key)`;
}

function Tile(props: { name: string; label: string; count: number; none: string; detail: string }) {
  const { count } = props;
  const state = count === 0 ? 'none' : count === 1 ? 'one' : 'many';
  const verdict = count === 0 ? props.none : count === 1 ? 'exactly one' : 'duplicates!';
  return (
    <div className={`tile ${state}`} data-testid={`count-${props.name}`} data-count={count}>
      <div className="count">{count}</div>
      <div className="label">{props.label}</div>
      <div className="verdict">{verdict}</div>
      {props.detail && <div className="detail">{props.detail}</div>}
    </div>
  );
}

/** The attempts in send order, under one heading per call when a double click made two. */
function AttemptRows({ run }: { run: CheckoutRun }) {
  const calls = [...new Set(run.attempts.map((attempt) => attempt.call))].sort((a, b) => a - b);
  if (calls.length <= 1) {
    return run.attempts.map((attempt) => <AttemptRow attempt={attempt} key={attempt.number} />);
  }
  return calls.map((call) => (
    <Fragment key={call}>
      <tr className="call">
        <th colSpan={5}>Request {call} and its retries</th>
      </tr>
      {run.attempts
        .filter((attempt) => attempt.call === call)
        .map((attempt) => (
          <AttemptRow attempt={attempt} key={attempt.number} />
        ))}
    </Fragment>
  ));
}

function AttemptRow({ attempt }: { attempt: Attempt }) {
  const [badge, label, meaning] = describe(attempt);
  return (
    <tr data-testid="attempt" data-outcome={outcomeName(attempt)} data-call={attempt.call}>
      <td>{attempt.number}</td>
      <td className="when">
        {attempt.sentAtMs === null
          ? attempt.outcome.kind === 'pending'
            ? 'waiting'
            : '—'
          : `+${attempt.sentAtMs} ms`}
      </td>
      <td>
        <span className={`badge ${badge}`}>{label}</span>
      </td>
      <td>{meaning}</td>
      <td className="retry">
        {attempt.retryInMs !== undefined ? `retrying in ${attempt.retryInMs} ms` : ''}
      </td>
    </tr>
  );
}

/** For tests: the outcome's kind, with a replayed error told apart from a first one. */
function outcomeName({ outcome }: Attempt): string {
  return outcome.kind === 'error' && outcome.replayed ? 'replayed-error' : outcome.kind;
}

function describe(attempt: Attempt): [badge: string, label: string, meaning: string] {
  const { outcome } = attempt;
  switch (outcome.kind) {
    case 'pending':
      return attempt.sentAtMs === null
        ? ['pending', 'waiting…', 'held back by the added latency']
        : ['pending', 'sending…', 'waiting for the server'];
    case 'executed':
      return ['executed', 'executed', 'the server ran the checkout for this request'];
    case 'replayed':
      return ['replayed', 'replayed', 'answered from the stored result: nothing ran again'];
    case 'in-progress':
      return [
        'in-progress',
        '409 in progress',
        `another attempt holds the key${outcome.retryAfterMs !== null ? `; the server said to retry in ${outcome.retryAfterMs} ms` : ''}`,
      ];
    case 'reply-lost':
      return [
        'failed',
        'failed: reply lost',
        outcome.serverSaid === 'executed'
          ? 'the server ran it, then the reply was dropped on the way back'
          : `the server answered (${outcome.serverSaid.replace('-', ' ')}), the reply was dropped`,
      ];
    case 'not-sent':
      return ['failed', 'failed: not sent', 'the request never left the browser'];
    case 'connection-lost':
      return ['failed', 'failed: server crashed', 'the connection died with the server process'];
    case 'page-left':
      return [
        'stopped',
        'no answer: page left',
        'the page was reloaded or left before the answer came; the server may have run it',
      ];
    case 'error':
      return outcome.replayed
        ? ['replayed', 'replayed', `the stored answer again: ${outcome.message}`]
        : [
            'failed',
            `failed: ${outcome.status}`,
            outcome.status < 500
              ? `${outcome.message} (stored under the key)`
              : `${outcome.message} (the key was released: a retry runs it again)`,
          ];
  }
}
