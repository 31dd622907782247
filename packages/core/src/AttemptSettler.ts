import type { AttemptHost } from './AttemptContext.js';
import type { Emit } from './engineEvents.js';
import { storedErrorOf } from './errorPolicy.js';
import { isLeaseLostError } from './errors/LeaseLostError.js';
import {
  isUnserializableValueError,
  UnserializableValueError,
} from './errors/UnserializableValueError.js';
import type { Attempt, RunResult } from './Idempotency.js';
import type { IdempotencySettings } from './resolveSettings.js';
import type { IdempotencyRecord, JsonValue, StoredOutcome } from './store/record.js';

/**
 * Settles a claimed key by what its attempt came to, fenced by the claim's version: an
 * answer stored (or released, asked so), a failure stored or released as the error policy
 * says, a result the serializer refuses settled with `UnserializableValueError`. Every
 * ending is a value; only a store that fails throws.
 */
export class AttemptSettler implements AttemptHost {
  readonly store: IdempotencySettings['store'];
  readonly serializer: IdempotencySettings['serializer'];
  readonly #settings: IdempotencySettings;
  readonly #emit: Emit;

  constructor(settings: IdempotencySettings, emit: Emit) {
    this.store = settings.store;
    this.serializer = settings.serializer;
    this.#settings = settings;
    this.#emit = emit;
  }

  /** A failure: stored as the key's outcome, or the key freed, as the error policy says. */
  async failed(
    record: IdempotencyRecord,
    error: unknown,
    startedAt: number,
  ): Promise<RunResult<never>> {
    if (isLeaseLostError(error)) return this.#lost(record, error, startedAt);
    if (this.#settings.errorPolicy.classify(error) === 'store') {
      try {
        await this.#completeWithError(record, error, startedAt);
      } catch (completeError) {
        if (!isLeaseLostError(completeError)) throw completeError;
        return { ok: false, replayed: false, error: completeError };
      }
    } else {
      try {
        await this.store.release(record);
        this.#emit('released', record, startedAt, { error });
      } catch (releaseError) {
        if (!isLeaseLostError(releaseError)) throw releaseError;
        this.#emit('lease_lost', record, startedAt, { error: releaseError });
      }
    }
    return { ok: false, replayed: false, error };
  }

  /** An answer: stored (fenced by the claim's version) unless it asks to keep nothing. */
  async succeeded<T>(
    record: IdempotencyRecord,
    outcome: Extract<Attempt<T>, { ok: true }>,
    startedAt: number,
  ): Promise<RunResult<T>> {
    const answered = {
      ok: true,
      replayed: false,
      value: outcome.value,
      version: record.version,
    } as const;
    if (outcome.keep === 'nothing') {
      try {
        await this.store.release(record);
      } catch (error) {
        if (isLeaseLostError(error)) return this.#lost(record, error, startedAt);
        throw error;
      }
      this.#emit('released', record, startedAt);
      return answered;
    }
    let json: JsonValue;
    try {
      json = this.serializer.serialize('stored' in outcome ? outcome.stored : outcome.value);
    } catch (cause) {
      try {
        const error = await this.settleUnstorable(record, 'The procedure', cause, startedAt);
        return { ok: false, replayed: false, error };
      } catch (error) {
        if (isLeaseLostError(error)) return { ok: false, replayed: false, error };
        throw error;
      }
    }
    try {
      await this.store.complete(record, { kind: 'success', value: json }, this.#settings.ttlMs);
    } catch (error) {
      if (isLeaseLostError(error)) return this.#lost(record, error, startedAt);
      throw error;
    }
    this.#emit('completed', record, startedAt);
    return answered;
  }

  /**
   * Work that ran but whose result the serializer refuses. Releasing the key would run the
   * side effects again on the retry, so the key is settled with this error instead.
   */
  async settleUnstorable(
    record: IdempotencyRecord,
    subject: string,
    cause: unknown,
    startedAt: number,
  ): Promise<UnserializableValueError> {
    const error = new UnserializableValueError(
      isUnserializableValueError(cause) ? cause.path : '',
      `${subject} ran, but its result could not be stored, so this error is the outcome of ` +
        `key "${record.key}": a retry with the same key gets it again and runs nothing. ` +
        `${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
    await this.#completeWithError(record, error, startedAt, cause);
    return error;
  }

  /** What a lost lease answers: nothing more is written, another attempt owns the key. */
  #lost(record: IdempotencyRecord, error: unknown, startedAt: number) {
    this.#emit('lease_lost', record, startedAt, { error });
    return { ok: false, replayed: false, error } as const;
  }

  /** Settles the key with `error` as its outcome, replayed to every retry. Fenced. */
  async #completeWithError(
    record: IdempotencyRecord,
    error: unknown,
    startedAt: number,
    unstorable?: unknown,
  ) {
    const { errorPolicy, serializer } = this.#settings;
    const { stored, refused } = storedErrorOf(errorPolicy, error, serializer);
    const outcome: StoredOutcome = { kind: 'error', error: stored };
    try {
      await this.store.complete(record, outcome, this.#settings.ttlMs);
    } catch (completeError) {
      if (isLeaseLostError(completeError)) {
        this.#emit('lease_lost', record, startedAt, { error: completeError });
      }
      throw completeError;
    }
    this.#emit('completed', record, startedAt, { error, unstorable: unstorable ?? refused });
  }
}
