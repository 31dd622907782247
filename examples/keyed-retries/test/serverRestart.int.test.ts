import { randomUUID } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import {
  idempotencyHeaders,
  idempotencyLink,
  isOutcomeUnknown,
  KEYED_RETRY_BUDGET,
  keyedRetryLink,
} from '@idem/client';
import { isRetryBudgetExhaustedError, RetryBudget } from '@idem/core';
import { seededRandom } from '@idem/core/testing';
import { createTRPCClient, httpLink } from '@trpc/client';
import superjson from 'superjson';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  type AppRouter,
  type KeyedRetriesServer,
  type PlacedOrder,
  startServer,
} from '../src/server.js';
import { lossyNetwork } from './lossyNetwork.js';

const CALLS = 1_000;
const IN_FLIGHT = 50;
const DROP_RESPONSE_RATE = 0.3;
/** The restart starts once this many calls have settled, mid-run. */
const RESTART_AFTER_CALLS = 300;
/** How long the server refuses connections: about a Node server's restart. */
const DOWN_MS = 1_000;
/** "Retry later": how long the app waits before sending a call of unknown outcome again. */
const LATER_MS = 500;
/** Rounds of "retry later" the app allows a call; never reached in practice. */
const MAX_ROUNDS = 20;

let server: KeyedRetriesServer;

beforeAll(async () => {
  server = await startServer();
});

afterAll(async () => {
  await server?.close();
});

interface Outcome {
  callId: string;
  /** How many times the app sent the call (1 + its "retry later" rounds). */
  rounds: number;
  result: { ok: true; value: PlacedOrder } | { ok: false; error: unknown };
}

it('one client, 30 % of replies dropped, the server restarted mid-run: the default budget never runs dry and every call runs once', async () => {
  const network = lossyNetwork({
    dropResponseRate: DROP_RESPONSE_RATE,
    failBeforeSendRate: 0,
    seed: 31,
  });
  // The links keep the first URL; each request goes to wherever the server is now.
  const firstUrl = server.trpcUrl;
  const fetch: typeof network.fetch = (input, init) =>
    network.fetch(String(input).replace(firstUrl, server.trpcUrl), init);

  // The default budget (the link makes exactly this one when given none), made here so
  // the test can watch its level.
  const budget = new RetryBudget(KEYED_RETRY_BUDGET);
  let lowestTokens = budget.available;
  let retries = 0;
  let down = false;
  let retriesWhileDown = 0;
  const client = createTRPCClient<AppRouter>({
    links: [
      idempotencyLink(),
      keyedRetryLink({
        budget,
        random: seededRandom(31),
        onRetry: () => {
          retries += 1;
          if (down) retriesWhileDown += 1;
          lowestTokens = Math.min(lowestTokens, budget.available);
        },
      }),
      httpLink({ url: firstUrl, fetch, transformer: superjson, headers: idempotencyHeaders }),
    ],
  });

  /** Every error any round of any call ended with, to check none was a dry budget. */
  const errorsSeen: unknown[] = [];
  /** What an app does with a call: on an unknown outcome, retry later with the same key. */
  const placeOrder = async (callId: string): Promise<Outcome> => {
    const idempotencyKey = randomUUID();
    for (let rounds = 1; ; rounds++) {
      try {
        const value = await client.order.place.mutate({ callId }, { context: { idempotencyKey } });
        return { callId, rounds, result: { ok: true, value } };
      } catch (error) {
        errorsSeen.push(error);
        if (!isOutcomeUnknown(error) || rounds >= MAX_ROUNDS) {
          return { callId, rounds, result: { ok: false, error } };
        }
        await new Promise((resolve) => setTimeout(resolve, LATER_MS));
      }
    }
  };

  const prefix = 'restart:';
  let settledCalls = 0;
  let restarted: Promise<void> | undefined;
  const outcomes: Outcome[] = new Array(CALLS);
  let next = 0;
  const startedAt = performance.now();
  const worker = async () => {
    while (next < CALLS) {
      const index = next++;
      outcomes[index] = await placeOrder(`${prefix}${index}`);
      settledCalls += 1;
      if (settledCalls === RESTART_AFTER_CALLS) {
        down = true;
        restarted = server.restart(DOWN_MS).finally(() => {
          down = false;
        });
      }
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  await restarted;
  const durationMs = Math.round(performance.now() - startedAt);

  const rows = await server.placedRows(prefix);
  const rowsByCall = new Map<string, PlacedOrder[]>();
  for (const row of rows) rowsByCall.set(row.callId, [...(rowsByCall.get(row.callId) ?? []), row]);
  const summary = {
    run: 'one client, 30 % replies dropped, server restarted mid-run (default budget)',
    calls: CALLS,
    executions: rows.length,
    requestsSent: network.counters().requestsSent,
    responsesDropped: network.counters().responsesDropped,
    retries,
    retriesWhileDown,
    unknownOutcomes: errorsSeen.length,
    callsRetriedLater: outcomes.filter((outcome) => outcome.rounds > 1).length,
    budgetExhausted: errorsSeen.filter((error) =>
      isRetryBudgetExhaustedError((error as Error).cause),
    ).length,
    lowestBudgetTokens: lowestTokens,
    budgetCapacity: budget.capacity,
    durationMs,
  };
  console.log(`keyed-retries restart: ${JSON.stringify(summary)}`);
  const directory = new URL('../artifacts/', import.meta.url);
  await mkdir(directory, { recursive: true });
  await writeFile(new URL('restart.json', directory), `${JSON.stringify(summary, null, 2)}\n`);

  // The restart really happened mid-run and the link felt it.
  expect(restarted).toBeDefined();
  expect(retriesWhileDown).toBeGreaterThan(0);
  expect(network.counters().responsesDropped).toBeGreaterThan(0);
  // No call, in any round, ended with a dry budget: not even during the outage.
  expect(summary.budgetExhausted).toBe(0);
  // Every call settled with its result, and ran exactly once.
  expect(outcomes.find((outcome) => !outcome.result.ok)).toBeUndefined();
  expect(rows).toHaveLength(CALLS);
  expect(rowsByCall.size).toBe(CALLS);
  for (const outcome of outcomes) {
    const callRows = rowsByCall.get(outcome.callId);
    expect(callRows, outcome.callId).toHaveLength(1);
    expect(outcome.result.ok && outcome.result.value).toEqual(callRows?.[0]);
  }
});
