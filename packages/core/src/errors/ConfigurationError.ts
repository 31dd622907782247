import { guardFor, IdempotencyError, type IdempotencyErrorOptions } from './IdempotencyError.js';

/** Options that cannot work together, refused at start-up rather than failing later. */
export class ConfigurationError extends IdempotencyError {
  constructor(message: string, options?: IdempotencyErrorOptions) {
    super('INVALID_CONFIGURATION', message, options);
    this.name = 'ConfigurationError';
  }
}

export const isConfigurationError = guardFor<ConfigurationError>('INVALID_CONFIGURATION');
