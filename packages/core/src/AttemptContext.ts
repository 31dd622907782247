import { deriveKey } from './deriveKey.js';
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
    await store.saveStep(this.#record, name, json);
    if (this.#steps === this.#record.steps) this.#steps = { ...this.#steps };
    this.#steps[name] = json;
    return value;
  }
}
