import { isDeepStrictEqual } from 'node:util';
import { idempotencyHeaders, keyedRetryLink } from '@idem/client';
import { createTRPCClient, httpLink, TRPCClientError, type TRPCLink } from '@trpc/client';
import superjson from 'superjson';
import { nowMs, summarize } from '../lib/stats.js';
import { formatCount, formatMs } from '../lib/table.js';
import type { BenchRouter } from '../server/benchRouter.js';
import type { RunContext } from './RunContext.js';

interface StormVariant {
  label: string;
  procedure: 'transaction' | 'leaseWait' | 'lease';
  /** Options of the client's `keyedRetryLink`; none: no retry link. */
  retry?: Parameters<typeof keyedRetryLink>[0];
  /**
   * A variant that shows a behaviour of the defaults rather than a guarantee: its 409s are
   * counted and reported, not failed (exactly one execution is still required).
   */
  conflictsAllowed?: boolean;
}

const VARIANTS: StormVariant[] = [
  { label: 'transaction mode (row lock)', procedure: 'transaction' },
  { label: 'lease, inProgress: wait', procedure: 'leaseWait' },
  {
    label: 'lease, reject + retry (Retry-After ≤ 1 s)',
    procedure: 'lease',
    retry: { maxAttempts: 10, maxRetryAfterMs: 1_000 },
  },
  {
    label: 'lease, reject + retry (client defaults)',
    procedure: 'lease',
    retry: {},
    conflictsAllowed: true,
  },
];

/**
 * Duplicate storm: 500 concurrent requests with ONE key, each from its own client (its own
 * retry budget, as 500 double-submitting browsers would have). Exactly one may execute,
 * and every request must end with the stored outcome. Reports the time until the last
 * request had its answer.
 *
 * A quick run sends 100: it checks the behaviour, and must hold on a loaded machine, where
 * 500 duplicates queued on one key's lock can outwait transaction mode's 5 s lock wait.
 */
export async function duplicateStorm(context: RunContext, serverUrl: string): Promise<void> {
  const { sql } = context;
  const requests = context.quick ? 100 : 500;
  for (const variant of VARIANTS) {
    const id = `storm-${variant.procedure}-${Math.random().toString(36).slice(2, 10)}`;
    const input = { sku: 'tea', quantity: 1, ref: id };
    const clientFor = () => {
      const links: TRPCLink<BenchRouter>[] = [];
      if (variant.retry) links.push(keyedRetryLink(variant.retry));
      links.push(
        httpLink({
          url: serverUrl,
          transformer: superjson,
          headers: idempotencyHeaders.with({ 'x-tenant': 'storm' }),
        }),
      );
      return createTRPCClient<BenchRouter>({ links });
    };
    const clients = Array.from({ length: requests }, clientFor);

    const started = nowMs();
    const answeredAt: number[] = [];
    const outcomes = await Promise.allSettled(
      clients.map((client) =>
        client[variant.procedure]
          .mutate(input, { context: { idempotencyKey: id } })
          .finally(() => answeredAt.push(nowMs() - started)),
      ),
    );
    const elapsed = nowMs() - started;

    const rows = await sql<{ id: string }[]>`select id::text from bench_orders where ref = ${id}`;
    const executions = rows.length;
    const failures = outcomes.flatMap((outcome) =>
      outcome.status === 'rejected' ? [outcome.reason as unknown] : [],
    );
    const conflicts = failures.filter(
      (error) => error instanceof TRPCClientError && error.data?.httpStatus === 409,
    ).length;
    const values = outcomes.flatMap((outcome) =>
      outcome.status === 'fulfilled' ? [outcome.value] : [],
    );
    const first = values[0];
    const unequal = values.filter((value) => !isDeepStrictEqual(value, first)).length;
    const [row] = rows;
    const matchesRow =
      first !== undefined &&
      row !== undefined &&
      rows.length === 1 &&
      String(first.orderId) === row.id;

    const problems: string[] = [];
    if (executions !== 1) problems.push(`${executions} executions, expected 1`);
    const unexpected = variant.conflictsAllowed ? failures.length - conflicts : failures.length;
    if (unexpected > 0) {
      problems.push(
        `${failures.length} of ${requests} requests failed (${String((failures[0] as Error).message)})`,
      );
    }
    if (unequal > 0 || !matchesRow)
      problems.push(`${unequal} answers differ from the stored outcome`);
    for (const problem of problems) context.fail(`duplicate storm, ${variant.label}: ${problem}`);

    const latency = summarize(answeredAt);
    context.report({
      scenario: `duplicate storm (${requests} × 1 key)`,
      variant: variant.label,
      result: `${formatCount(executions)} exec, all in ${formatMs(elapsed)}`,
      p50: formatMs(latency.p50),
      p99: formatMs(latency.p99),
      target: 'exactly 1 execution, same answer',
      verdict: problems.length > 0 ? 'FAILED' : conflicts > 0 ? 'info' : 'ok',
      ...(conflicts > 0
        ? {
            note: `${conflicts} of ${requests} gave up on a 409: Retry-After is the lease left (30 s), the client's deadline 30 s`,
          }
        : {}),
    });
  }
}
