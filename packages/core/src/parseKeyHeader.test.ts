import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { thrown } from '../test/thrown.js';
import { isInvalidKeyError } from './errors/InvalidKeyError.js';
import { formatKeyHeader, parseKeyHeader } from './parseKeyHeader.js';

/** Every key validateKey accepts: 1–255 printable ASCII characters. */
const anyKey = fc.string({
  unit: fc.integer({ min: 0x20, max: 0x7e }).map((code) => String.fromCharCode(code)),
  minLength: 1,
  maxLength: 255,
});

/** The Idempotency-Key field as a fetch `Headers` object gives it: trimmed, fields joined. */
function keyField(headers: Headers): string {
  const value = headers.get('Idempotency-Key');
  if (value === null) throw new Error('no Idempotency-Key field');
  return value;
}

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
        expect(parseKeyHeader(value, { fieldCount: 1 })).toBe(key);
        const sent = keyField(new Headers({ 'Idempotency-Key': value }));
        expect(parseKeyHeader(sent, { fieldCount: 1 })).toBe(key);
        // Without the field count only a key free of commas can be told from a joined list.
        if (!key.includes(',')) expect(parseKeyHeader(sent)).toBe(key);
      }),
      { numRuns: 2_000 },
    );
  });

  it('refuses a quoted key with a comma when the field count is unknown: two fields joined read so', () => {
    const headers = new Headers();
    headers.append('Idempotency-Key', '"a');
    headers.append('Idempotency-Key', 'b"');
    const joined = keyField(headers);
    expect(joined).toBe('"a, b"');
    expect(() => parseKeyHeader(joined)).toThrow(/cannot tell apart from two Idempotency-Key/);
    expect(() => parseKeyHeader('"a,b"')).toThrow(/comma inside its quoted string/);
    expect(() => parseKeyHeader(joined, { fieldCount: 2 })).toThrow(/more than one/);
    // The raw field list says there was one field: the comma is the key's own.
    expect(parseKeyHeader('"a, b"', { fieldCount: 1 })).toBe('a, b');
  });

  it('two keys joined as two header fields are refused, whatever their spelling', () => {
    fc.assert(
      fc.property(anyKey, anyKey, (first, second) => {
        const headers = new Headers();
        headers.append('Idempotency-Key', formatKeyHeader(first));
        headers.append('Idempotency-Key', formatKeyHeader(second));
        for (const fields of [{}, { fieldCount: 2 }]) {
          const refused = thrown(() => parseKeyHeader(keyField(headers), fields));
          expect(isInvalidKeyError(refused)).toBe(true);
        }
      }),
      { numRuns: 500 },
    );
  });
});
