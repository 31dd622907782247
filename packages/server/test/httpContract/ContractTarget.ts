import type { Gates } from '../fixtures/testApp.js';

/** One HTTP answer, with the body exactly as sent. */
export interface HttpAnswer {
  status: number;
  headers: Headers;
  text: string;
}

/** What idem said about a refused request, wherever the target's wire format puts it. */
export interface IdempotencyAnswer {
  code: string;
  type: string;
  reason?: string;
  retryAfterMs?: number;
}

/**
 * The routes every target serves, with the same behaviour:
 * - `echo`: runs once per key, answers `{ tag, user, payload, execution, at }`;
 * - `gated`: like echo, but its first attempt waits at `gates` (named by `tag`) until opened;
 * - `validated`: takes `{ tag, cents: integer }` and answers `{ execution, cents }`.
 */
export type ContractRoute = 'echo' | 'gated' | 'validated';

/**
 * One endpoint style that must keep idem's HTTP contract: the tRPC middleware behind
 * tRPC's fetch adapter, or `idempotentHandler` around plain Fetch handlers. Each is served
 * on a real socket, on one database, with the principal taken from the `x-user` header.
 */
export interface ContractTarget {
  url: string;
  /** The request path of a route, e.g. `/trpc/echo` or `/api/echo`. */
  pathOf(route: ContractRoute): string;
  /** The request body that carries `json` (JSON text) as the route's input. */
  bodyOf(json: string): string;
  /** idem's code, docs link and details in an error answer, if it is one of idem's. */
  idempotencyOf(answer: HttpAnswer): IdempotencyAnswer | undefined;
  /** The route's result in a success answer. */
  resultOf(answer: HttpAnswer): unknown;
  executionsOf(tag: string): number;
  gates: Gates;
  /** How many `idem_keys` rows hold `key`, in any scope. */
  storedKeys(key: string): Promise<number>;
}
