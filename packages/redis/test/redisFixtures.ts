import type { ClaimRequest } from '@idem/core/store';
import { claimRequest } from '@idem/core/testing/contract';
import { afterAll, beforeAll } from 'vitest';
import { type RedisConnection, type RedisStoreOptions, redisStore } from '../src/index.js';

/**
 * A Redis started and connected before the file's tests, and closed and stopped after them.
 * The answer reads the running server and client inside a test or hook.
 */
export function useRedis<
  Server extends { stop(): Promise<void> },
  Client extends { close(): Promise<unknown> },
>(
  start: () => Promise<Server>,
  connect: (server: Server) => Promise<Client>,
): () => { server: Server; client: Client } {
  let server: Server | undefined;
  let client: Client | undefined;
  beforeAll(async () => {
    server = await start();
    client = await connect(server);
  });
  afterAll(async () => {
    await client?.close();
    await server?.stop();
  });
  return () => {
    if (server === undefined || client === undefined) {
      throw new Error('useRedis: Redis runs only inside the tests and hooks of its file.');
    }
    return { server, client };
  };
}

let stores = 0;

/** A store on `client` (or on several connections) under a key prefix no other test uses: it starts with no keys. */
export function freshStore(
  client: RedisConnection | readonly RedisConnection[],
  options: RedisStoreOptions = {},
) {
  const keyPrefix = `test-${stores++}:`;
  return { keyPrefix, store: redisStore(client, { ...options, keyPrefix }) };
}

/**
 * The store contract's claim with a 30 s lease (time passes for real against Redis),
 * changed by `overrides`.
 */
export const request = (overrides: Partial<ClaimRequest> = {}): ClaimRequest =>
  claimRequest({ leaseMs: 30_000, ...overrides });

/** `list[index]`; an error when it has no such item. */
export function at<Item>(list: readonly Item[], index: number): Item {
  const item = list[index];
  if (item === undefined) throw new Error(`no item at ${index} of ${list.length}`);
  return item;
}

/**
 * Calls `attempt` every 20 ms until `done` holds for its answer, and returns that answer;
 * throws after 30 s.
 */
export async function until<Answer>(
  what: string,
  attempt: () => Promise<Answer>,
  done: (answer: Answer) => boolean = (answer) => answer === true,
): Promise<Answer> {
  const deadline = performance.now() + 30_000; // monotonic: a clock step cannot cut it short
  for (;;) {
    const answer = await attempt();
    if (done(answer)) return answer;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The Redis server's clock (`TIME`) on `node`, in whole epoch milliseconds. */
export async function serverTimeOf(node: {
  sendCommand(args: string[]): Promise<unknown>;
}): Promise<number> {
  const [seconds, micros] = (await node.sendCommand(['TIME'])) as string[];
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}
