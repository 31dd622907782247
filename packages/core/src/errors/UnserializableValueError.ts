import { guardFor, IdempotencyError, type IdempotencyErrorOptions } from './IdempotencyError.js';

/** A value cannot be fingerprinted or stored (a cycle, a function, a symbol). */
export class UnserializableValueError extends IdempotencyError {
  /** Where in the value the problem sits, as a JSON-pointer-like path. */
  readonly path: string;

  constructor(path: string, message: string, options?: IdempotencyErrorOptions) {
    super('UNSERIALIZABLE_VALUE', message, options);
    this.name = 'UnserializableValueError';
    this.path = path;
  }
}

export const isUnserializableValueError =
  guardFor<UnserializableValueError>('UNSERIALIZABLE_VALUE');
