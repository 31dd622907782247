import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Mode } from './failoverApp.js';
import { PATHS } from './failoverApp.js';

/** One user intent: a key, the endpoint it goes to, and how its client misbehaves. */
export interface KeyedIntent {
  key: string;
  mode: Mode;
  /** Sends its first request twice at once (a double click). */
  duplicate: boolean;
  /** Throws away the first answer it gets and asks again with the same key (a lost reply). */
  dropFirstReply: boolean;
}

/** What clients saw, over every request of a run. */
export interface Ledger {
  /** Per key, the first successful answer a client received (kept or dropped), and when. */
  acknowledged: Map<string, { body: string; at: number }>;
  /** Later successful answers of a key that differ from its first one: acknowledged results lost. */
  mismatches: { key: string; first: string; later: string }[];
  /** Answers the server ran the handler for (not replays): when the request was sent and answered. */
  originals: { key: string; sentAt: number; answeredAt: number }[];
  requests: number;
  duplicateRequests: number;
  droppedReplies: number;
  /** Requests that got no answer within `attemptTimeoutMs`. */
  timedOut: number;
  /** Answers by HTTP status (0: no answer: a network error or a timeout). */
  statuses: Map<number, number>;
  /** The key that took longest from its first request to the answer its client kept, and the statuses it got. */
  slowestKey: { key: string; ms: number; statuses: number[] };
}

export function newLedger(): Ledger {
  return {
    acknowledged: new Map(),
    mismatches: [],
    originals: [],
    requests: 0,
    duplicateRequests: 0,
    droppedReplies: 0,
    timedOut: 0,
    statuses: new Map(),
    slowestKey: { key: '', ms: 0, statuses: [] },
  };
}

export interface TrafficOptions {
  baseUrl: string;
  ledger: Ledger;
  /** The longest one request may go unanswered before the client gives up on it and retries. */
  attemptTimeoutMs?: number;
  /** The longest a key may go without a successful answer before the run fails naming it. */
  keyDeadlineMs?: number;
}

interface Answer {
  status: number;
  body: string;
  replayed: boolean;
  retryAfterS: number;
}

async function send(intent: KeyedIntent, options: TrafficOptions): Promise<Answer> {
  const { ledger } = options;
  ledger.requests++;
  const sentAt = performance.now();
  let answer: Answer;
  try {
    const response = await fetch(`${options.baseUrl}${PATHS[intent.mode]}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': intent.key },
      body: JSON.stringify({ item: intent.key }),
      signal: AbortSignal.timeout(options.attemptTimeoutMs ?? 20_000),
    });
    answer = {
      status: response.status,
      body: await response.text(),
      replayed: response.headers.get('idempotent-replayed') === 'true',
      retryAfterS: Number(response.headers.get('retry-after') ?? 0),
    };
  } catch (error) {
    if ((error as Error).name === 'TimeoutError') ledger.timedOut++;
    answer = { status: 0, body: '', replayed: false, retryAfterS: 0 };
  }
  ledger.statuses.set(answer.status, (ledger.statuses.get(answer.status) ?? 0) + 1);
  if (answer.status === 200) record(intent.key, answer, sentAt, ledger);
  return answer;
}

function record(key: string, answer: Answer, sentAt: number, ledger: Ledger): void {
  const answeredAt = performance.now();
  if (!answer.replayed) ledger.originals.push({ key, sentAt, answeredAt });
  const first = ledger.acknowledged.get(key);
  if (!first) ledger.acknowledged.set(key, { body: answer.body, at: answeredAt });
  else if (first.body !== answer.body) {
    ledger.mismatches.push({ key, first: first.body, later: answer.body });
  }
}

/**
 * Sends `intent` until a client keeps a successful answer: a keyed client's retries
 * (no answer, 409 with Retry-After, 5xx), with backoff, the same key every time. Fails
 * naming the key when none came within the deadline: a key that cannot be answered.
 */
export async function settle(intent: KeyedIntent, options: TrafficOptions): Promise<void> {
  const startedAt = performance.now();
  const deadline = startedAt + (options.keyDeadlineMs ?? 60_000);
  let dropped = !intent.dropFirstReply;
  const statuses: number[] = [];
  for (let attempt = 0; ; attempt++) {
    const copies = attempt === 0 && intent.duplicate ? 2 : 1;
    if (copies === 2) options.ledger.duplicateRequests++;
    const answers = await Promise.all(Array.from({ length: copies }, () => send(intent, options)));
    statuses.push(...answers.map((answer) => answer.status));
    if (answers.some((answer) => answer.status === 200)) {
      if (dropped) {
        const ms = performance.now() - startedAt;
        if (ms > options.ledger.slowestKey.ms) {
          options.ledger.slowestKey = { key: intent.key, ms: Math.round(ms), statuses };
        }
        return;
      }
      dropped = true;
      options.ledger.droppedReplies++;
      continue;
    }
    const unexpected = answers.find(
      (answer) => answer.status !== 0 && answer.status !== 409 && answer.status < 500,
    );
    if (unexpected) {
      throw new Error(`key ${intent.key}: answered ${unexpected.status} ${unexpected.body}`);
    }
    if (performance.now() > deadline) {
      throw new Error(`key ${intent.key}: no answer within ${options.keyDeadlineMs ?? 60_000} ms`);
    }
    const retryAfterMs = Math.max(...answers.map((answer) => answer.retryAfterS * 1000));
    const backoffMs = Math.min(500, 25 * 2 ** Math.min(attempt, 5)) * (0.5 + Math.random() / 2);
    await sleep(Math.min(retryAfterMs || backoffMs, 1_000));
  }
}

/** Settles every intent, `concurrency` clients at a time, each taking the next intent when done. */
export async function runTraffic(
  intents: readonly KeyedIntent[],
  concurrency: number,
  options: TrafficOptions,
): Promise<void> {
  let next = 0;
  const client = async () => {
    while (next < intents.length) {
      const intent = intents[next++];
      if (intent) await settle(intent, options);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, client));
}
