import { createTRPCUntypedClient } from '@trpc/client';
import { afterEach, beforeEach, vi } from 'vitest';
import type { KeyedRetryLinkOptions, RetryEvent } from '../src/links/KeyedRetryLinkOptions.js';
import { keyedRetryLink } from '../src/links/keyedRetryLink.js';
import { scriptedLink } from './scriptedLink.js';

/**
 * Fake timers in every test of the file that calls it (before its `describe`s), and real
 * ones again after each, with mocks restored and stubbed environment variables undone.
 */
export function fakeTimersPerTest(): void {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
    vi.unstubAllEnvs();
  });
}

/** Settles a promise into a value, so a rejection is never unhandled while timers run. */
export async function settle<T>(
  promise: Promise<T>,
): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  return promise.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );
}

/**
 * A client whose keyedRetryLink (jitter drawn as 0.5 unless `random` is given) sends to
 * a scripted server; `retries` collects what `onRetry` was told.
 */
export function setup(
  replies: Parameters<typeof scriptedLink>[0],
  options: KeyedRetryLinkOptions = {},
) {
  const server = scriptedLink(replies);
  const retries: RetryEvent[] = [];
  const client = createTRPCUntypedClient({
    links: [
      keyedRetryLink({
        random: () => 0.5,
        ...options,
        onRetry: (event) => {
          retries.push(event);
          options.onRetry?.(event);
        },
      }),
      server.link,
    ],
  });
  return { client, server, retries };
}

/** The call options of a keyed mutation. */
export const KEYED = { context: { idempotencyKey: 'key-1' } };
