import type { IdempotencySettings } from '@idem/core';
import { getTRPCErrorFromUnknown, type TRPCError } from '@trpc/server';
import {
  transactionMode as sharedTransactionMode,
  type TransactionModeConfig,
} from '../transactionMode/transactionMode.js';

/** The part of a tRPC middleware result that idem reads. */
export type ResultLike = { ok: true; data: unknown } | { ok: false; error: TRPCError };

/** How a call ended: its result (the procedure's, or one rebuilt from the store), and whether it came from the store. */
export interface Answer<TResult> {
  result: TResult | ResultLike;
  replayed: boolean;
}

/**
 * Transaction mode for the tRPC middleware: the shared engine, with a procedure's result
 * (tRPC's `next()`) as the answer. A success commits its writes; an error goes to the error
 * policy (stored with the writes rolled back, or released); a stored error replays as a
 * `TRPCError`.
 */
export function transactionMode(
  config: Omit<TransactionModeConfig<ResultLike>, 'settle' | 'replay'> & {
    settings: IdempotencySettings;
  },
) {
  return sharedTransactionMode<ResultLike>({
    ...config,
    settle: (result) =>
      result.ok ? { kind: 'commit', value: result.data } : { kind: 'error', error: result.error },
    replay: (replayed) =>
      replayed.ok
        ? { ok: true, data: replayed.value }
        : { ok: false, error: getTRPCErrorFromUnknown(replayed.error) },
  });
}
