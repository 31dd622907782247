import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isInvalidKeyError } from './errors/InvalidKeyError.js';
import { formatKeyHeader, parseKeyHeader } from './parseKeyHeader.js';

/** Every key validateKey accepts: 1–255 printable ASCII characters. */
const anyKey = fc.string({
  unit: fc.integer({ min: 0x20, max: 0x7e }).map((code) => String.fromCharCode(code)),
  minLength: 1,
  maxLength: 255,
});

describe('formatKeyHeader', () => {
  it('sends a plain key bare, as every server reads it', () => {
    expect(formatKeyHeader('8e03978e-40d5-43e8-bc93-6894a57f9324')).toBe(
      '8e03978e-40d5-43e8-bc93-6894a57f9324',
    );
  });

  it('quotes a key whose bare form would read as a list, a quoted string or a trimmed key', () => {
    expect(formatKeyHeader('cart 7, try 2')).toBe('"cart 7, try 2"');
    expect(formatKeyHeader('"quoted')).toBe('"\\"quoted"');
    expect(formatKeyHeader(' padded ')).toBe('" padded "');
    expect(formatKeyHeader('a\\b, c')).toBe('"a\\\\b, c"');
  });

  it('is read back as the same key, also after a Headers object trims the value', () => {
    fc.assert(
      fc.property(anyKey, (key) => {
        const value = formatKeyHeader(key);
        expect(parseKeyHeader(value)).toBe(key);
        const sent = new Headers({ 'Idempotency-Key': value }).get('Idempotency-Key')!;
        expect(parseKeyHeader(sent)).toBe(key);
      }),
      { numRuns: 2_000 },
    );
  });

  it('two keys joined as two header fields are refused, whatever their spelling', () => {
    fc.assert(
      fc.property(anyKey, anyKey, (first, second) => {
        const headers = new Headers();
        headers.append('Idempotency-Key', formatKeyHeader(first));
        headers.append('Idempotency-Key', formatKeyHeader(second));
        let refused: unknown;
        try {
          parseKeyHeader(headers.get('Idempotency-Key')!);
        } catch (error) {
          refused = error;
        }
        expect(isInvalidKeyError(refused)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });
});
