import { sha256HexSync } from './sha256Sync.js';
import { validateKey } from './validateKey.js';

/**
 * The key for a downstream call (a payment provider, another service) made on behalf of
 * `(scope, key)`: the same on every attempt of that key, different for every scope, so a
 * provider that deduplicates by key deduplicates retries and never mixes two principals'
 * calls. `idem-<128 bits of SHA-256(scope, key)>-<suffix>`; throws `InvalidKeyError` when
 * the suffix makes it more than 255 printable ASCII characters.
 */
export function deriveKey(scope: string, key: string, suffix: string): string {
  return validateKey(`idem-${sha256HexSync(`${scope}\u0000${key}`).slice(0, 32)}-${suffix}`);
}
