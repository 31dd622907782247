import { type ClaimedEvent, claimBatch } from './claimBatch.js';
import { cleanupSent } from './cleanupSent.js';
import { publishClaimed } from './publishClaimed.js';
import type { RelaySettings } from './relaySettings.js';
import { settleBatch } from './settleBatch.js';
import { type RoundTally, tally } from './tally.js';

/** A claimed batch and the token its leases carry. */
export interface Claim {
  token: string;
  claimed: ClaimedEvent[];
}

const CLEANUP_BATCH = 1_000;

/** Leases the next batch under a fresh token. */
export async function claimRound(settings: RelaySettings): Promise<Claim> {
  const { db, batchSize, leaseMs, ordered, clock } = settings;
  const token = globalThis.crypto.randomUUID();
  return { token, claimed: await claimBatch(db, { batchSize, leaseMs, ordered, token, clock }) };
}

/** Publishes and settles a claimed batch, and counts what became of it. */
export async function finishRound(
  settings: RelaySettings,
  { token, claimed }: Claim,
): Promise<RoundTally> {
  if (claimed.length === 0) {
    return tally({ claimed, attempts: [], settled: new Set(), nowMs: settings.now() });
  }
  const attempts = await publishClaimed(claimed, settings);
  const settled = await settleBatch(
    settings.db,
    token,
    attempts.map((attempt) => attempt.settlement),
    { keepSent: settings.retainSentMs > 0, clock: settings.clock },
  );
  return tally({ claimed, attempts, settled, nowMs: settings.now() });
}

/** Deletes every sent event older than `retainSentMs`, in batches; returns how many. */
export async function cleanupAll(settings: RelaySettings): Promise<number> {
  const { db, retainSentMs, clock } = settings;
  let total = 0;
  for (;;) {
    const deleted = await cleanupSent(db, { retainSentMs, limit: CLEANUP_BATCH, clock });
    total += deleted;
    if (deleted < CLEANUP_BATCH) return total;
  }
}
