/**
 * A fresh idempotency key: a random (version 4) UUID.
 *
 * `crypto.randomUUID()` exists only in secure contexts (HTTPS, localhost); a page served
 * over plain HTTP on a LAN address still has `crypto.getRandomValues`, so the same UUID
 * is built from that instead of failing.
 */
export function createKey(): string {
  const webCrypto = globalThis.crypto;
  if (typeof webCrypto?.randomUUID === 'function') return webCrypto.randomUUID();
  const bytes = webCrypto.getRandomValues(new Uint8Array(16));
  // RFC 9562 §5.4: version 4 in the high nibble of byte 6, variant 10 in byte 8.
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x40;
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80;
  const hex = Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
