import type { IdempotencySettings } from '@idem/core';
import { getTRPCErrorFromUnknown, type TRPCError } from '@trpc/server';
import {
  transactionMode as sharedTransactionMode,
  type TransactionModeConfig,
} from '../transactionMode/transactionMode.js';

/** The part of a tRPC middleware result that idem reads. */
export type ProcedureResult = { ok: true; data: unknown } | { ok: false; error: TRPCError };

/** How a call ended: its result (the procedure's, or one rebuilt from the store), and whether it came from the store. */
export interface CallOutcome<TResult> {
  result: TResult | ProcedureResult;
  replayed: boolean;
}

/**
 * Transaction mode for the tRPC middleware: the shared engine, with a procedure's result
 * (tRPC's `next()`) as the answer. A success commits its writes; an error goes to the error
 * policy (stored with the writes rolled back, or released); a stored error replays as a
 * `TRPCError`.
 */
export function transactionMode(
  config: Omit<TransactionModeConfig<ProcedureResult>, 'settle' | 'replay'> & {
    settings: IdempotencySettings;
  },
) {
  return sharedTransactionMode<ProcedureResult>({
    ...config,
    settle: (result) =>
      result.ok ? { kind: 'commit', value: result.data } : { kind: 'error', error: result.error },
    replay: (replayed) =>
      replayed.ok
        ? { ok: true, data: replayed.value }
        : { ok: false, error: getTRPCErrorFromUnknown(replayed.error) },
  });
}
