import { deriveKey } from './deriveKey.js';
import { isLeaseLostError } from './errors/LeaseLostError.js';
import type { UnserializableValueError } from './errors/UnserializableValueError.js';
import type { HandlerContext } from './Idempotency.js';
import type { Lease } from './lease.js';
import type { Serializer } from './serializer.js';
import type { ClaimResult, IdempotencyStore } from './store/IdempotencyStore.js';
import type { IdempotencyRecord, JsonValue } from './store/record.js';

/** What an attempt's recovery points need of their engine. */
export interface AttemptHost {
  store: IdempotencyStore;
  serializer: Serializer;
  /** Settles the key with an `UnserializableValueError` for a result that cannot be stored. */
  settleUnstorable(
    record: IdempotencyRecord,
    subject: string,
    cause: unknown,
    startedAt: number,
  ): Promise<UnserializableValueError>;
}

/**
 * The handler's context for one attempt: a class, so that making one per call costs an
 * allocation, not an object literal with an accessor (a runtime call each time). `step`
 * and `deriveKey` are own properties, so a handler may take them apart
 * (`const { step } = ctx`); `signal` is read through the lease, which makes its
 * `AbortController` only when it is read.
 */
export class AttemptContext implements HandlerContext {
  readonly key: string;
  readonly scope: string;
  readonly attempt: number;
  readonly version: number;
  readonly takeover: boolean;
  readonly step: HandlerContext['step'];
  readonly deriveKey: (suffix: string) => string;
  readonly #host: AttemptHost;
  readonly #record: IdempotencyRecord;
  readonly #lease: Lease;
  readonly #startedAt: number;
  /**
   * Recovery points saved so far; copied before the first write, so the store's record is
   * never changed under it.
   */
  #steps: Record<string, JsonValue>;
  /**
   * Set once a recovery point settled the key (its result could not be stored): from then
   * on the key's outcome is this error, whatever the handler does after catching it.
   */
  #settled: { error: unknown } | undefined;
  /** The store's failure to save a recovery point, once it failed (not a lost lease). */
  #storeFailed: { error: unknown } | undefined;

  constructor(
    host: AttemptHost,
    claim: Extract<ClaimResult, { status: 'claimed' }>,
    lease: Lease,
    startedAt: number,
  ) {
    const { record } = claim;
    this.key = record.key;
    this.scope = record.scope;
    this.attempt = record.attempts;
    this.version = record.version;
    this.takeover = claim.takeover;
    this.step = (name, fn) => this.#step(name, fn);
    this.deriveKey = (suffix) => deriveKey(record.scope, record.key, suffix);
    this.#host = host;
    this.#record = record;
    this.#lease = lease;
    this.#startedAt = startedAt;
    this.#steps = record.steps;
  }

  get signal(): AbortSignal {
    return this.#lease.signal;
  }

  /**
   * The error a recovery point settled the key with, if one did: the key's outcome is that
   * error, whatever the handler did after catching it.
   */
  static settledBy(context: AttemptContext): { error: unknown } | undefined {
    return context.#settled;
  }

  /**
   * The store's error, when the handler failed by the store's failure to save one of its
   * recovery points (a database that went away): then the attempt is the store's failure,
   * as a claim or a completion that fails is, not an outcome of the handler's to store or
   * release with the store's words in it. A handler that caught it and answered anyway is
   * judged by its answer.
   */
  static failedByStore(context: AttemptContext, error: unknown): { error: unknown } | undefined {
    const failed = context.#storeFailed;
    if (failed === undefined) return undefined;
    // Adapters may wrap what the handler threw (tRPC makes it a TRPCError's cause).
    let link: unknown = error;
    for (let depth = 0; depth < 8; depth++) {
      if (link === failed.error) return failed;
      if (!(link instanceof Error)) return undefined;
      link = link.cause;
    }
    return undefined;
  }

  async #step<S>(name: string, fn: () => Promise<S> | S): Promise<S> {
    const { store, serializer } = this.#host;
    if (this.#settled) throw this.#settled.error;
    const stored = Object.hasOwn(this.#steps, name) ? this.#steps[name] : undefined;
    if (stored !== undefined) return serializer.deserialize(stored) as S;
    // A holder that was paused past its lease must not start new side effects: another
    // attempt may already own the key.
    this.#lease.assertHeld();
    const value = await fn();
    let json: JsonValue;
    try {
      json = serializer.serialize(value);
    } catch (cause) {
      this.#lease.stop();
      try {
        this.#settled = {
          error: await this.#host.settleUnstorable(
            this.#record,
            `The recovery point "${name}"`,
            cause,
            this.#startedAt,
          ),
        };
      } catch (error) {
        this.#settled = { error };
      }
      throw this.#settled.error;
    }
    try {
      await store.saveStep(this.#record, name, json);
    } catch (error) {
      if (!isLeaseLostError(error)) this.#storeFailed ??= { error };
      throw error;
    }
    if (this.#steps === this.#record.steps) this.#steps = { ...this.#steps };
    this.#steps[name] = json;
    return value;
  }
}
