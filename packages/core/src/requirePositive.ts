import { ConfigurationError } from './errors/ConfigurationError.js';

/**
 * The one check of a numeric option: a finite number above zero (and whole, with
 * `integer`), else a `ConfigurationError` worded the same way everywhere:
 * "`name` must be a positive integer (or number) [of `unit`]; got `value`."
 *
 * @example
 * const leaseMs = requirePositive('leaseMs', options.leaseMs ?? 30_000, { unit: 'milliseconds' });
 */
export function requirePositive(
  name: string,
  value: number,
  options: { integer?: boolean; unit?: string } = {},
): number {
  const valid =
    typeof value === 'number' &&
    Number.isFinite(value) &&
    value > 0 &&
    (!options.integer || Number.isInteger(value));
  if (!valid) {
    throw new ConfigurationError(
      `${name} must be a positive ${options.integer ? 'integer' : 'number'}` +
        `${options.unit ? ` of ${options.unit}` : ''}; got ${typeof value === 'string' ? JSON.stringify(value) : String(value)}.`,
    );
  }
  return value;
}
