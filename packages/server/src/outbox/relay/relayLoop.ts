import { keepsAhead, type LoopState, nextWait, type Pause, type RoundResult } from './nextWait.js';
import type { RelayEvent } from './RelayEvent.js';
import type { RelaySettings } from './relaySettings.js';
import type { Claim } from './runRound.js';
import type { RoundTally } from './tally.js';

/** What the loop needs of its relay: the relay's one state, its rounds, its clock. */
export interface LoopHost {
  readonly settings: RelaySettings;
  /** The relay's state now (stop() and notifications change it while the loop awaits). */
  state(): LoopState;
  /** Replaces the state, and ends a wait the new state is over with. */
  update(state: LoopState): void;
  claim(): Promise<Claim>;
  /** Publishes, settles and reports a claimed round. */
  finish(claim: Claim): Promise<RoundTally>;
  cleanup(): Promise<number>;
  /** Waits `wait`, or less (`waitIsOver`). */
  sleep(wait: Pause): Promise<void>;
  emit(event: RelayEvent): void;
}

/** A turn's result, and the full round it left publishing for the next turn to settle. */
interface Turn {
  result: RoundResult;
  ahead: Promise<RoundTally> | undefined;
}

/**
 * The relay's rounds while it is `running`: each turn's result goes through `nextWait`,
 * which says how long to wait before the next. Returns once stopped, after the rounds in
 * flight settled.
 */
export async function runLoop(host: LoopHost): Promise<void> {
  const { settings } = host;
  let nextCleanupAt = settings.now();
  /** A full round still publishing while the loop claims the next one. */
  let ahead: Promise<RoundTally> | undefined;
  while (host.state().status === 'running') {
    const cleanUp = settings.cleanupIntervalMs > 0 && settings.now() >= nextCleanupAt;
    if (cleanUp) nextCleanupAt = settings.now() + settings.cleanupIntervalMs;
    const turn = await takeTurn(host, ahead, cleanUp);
    ahead = turn.ahead;
    const decision = nextWait(host.state(), turn.result, settings);
    host.update(decision.state);
    if (decision.report) host.emit(decision.report);
    if (decision.wait.type !== 'none') await host.sleep(decision.wait);
  }
  await ahead?.catch((error: unknown) => reportPartner(host, error));
}

/**
 * Cleans up if due, claims, and settles the round, unless it is a full batch that may
 * publish while the next turn claims (`keepsAhead`). `previous`: the round left publishing
 * by the last turn, settled here.
 */
async function takeTurn(
  host: LoopHost,
  previous: Promise<RoundTally> | undefined,
  cleanUp: boolean,
): Promise<Turn> {
  /** The round a failure must still wait for. */
  let inFlight = previous;
  let before: RoundTally | undefined;
  try {
    if (cleanUp) await host.cleanup();
    const claim = await host.claim();
    const finishing = host.finish(claim);
    // Settled below or by the next turn; an error here is reported there.
    finishing.catch(() => undefined);
    inFlight = finishing;
    before = previous && (await previous);
    if (keepsAhead(claim.claimed.length, before, host.settings)) {
      return { result: { type: 'ahead', before }, ahead: finishing };
    }
    inFlight = undefined;
    const tally = await finishing;
    const overlapped = previous !== undefined;
    return { result: { type: 'settled', tally, before, overlapped }, ahead: undefined };
  } catch (error) {
    // The failed round's partner, if one is still publishing, settles on its own.
    await inFlight?.catch((partnerError: unknown) => reportPartner(host, partnerError));
    return { result: { type: 'failed', error, before }, ahead: undefined };
  }
}

/** Reports a failure of the round that was publishing beside one that failed (or at stop). */
const reportPartner = (host: LoopHost, error: unknown) =>
  host.emit({ type: 'error', error, retryInMs: 0 });
