import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type InvalidKeyError, isInvalidKeyError } from './errors/InvalidKeyError.js';
import { MAX_KEY_LENGTH, validateKey } from './validateKey.js';

function refusal(key: unknown): InvalidKeyError {
  try {
    validateKey(key);
  } catch (error) {
    if (isInvalidKeyError(error)) return error;
    throw error;
  }
  throw new Error(`expected ${JSON.stringify(key)} to be refused`);
}

/**
 * Keys holding a character outside printable ASCII, by what they hold: the key, and how the
 * refusal names the character.
 */
const INVALID_CHARACTER_KEYS: Record<string, [key: string, detail: string]> = {
  'CRLF header injection': ['abc\r\nSet-Cookie: x=1', 'control character U+000D at index 3'],
  'a newline': ['abc\n', 'control character U+000A at index 3'],
  NUL: ['\u0000', 'control character U+0000 at index 0'],
  'a tab': ['a\tb', 'control character U+0009 at index 1'],
  DEL: ['ab\u007f', 'control character U+007F at index 2'],
  'a C1 control': ['ab\u0085', 'control character U+0085 at index 2'],
  'an accented letter': ['clé', 'non-ASCII character U+00E9 at index 2'],
  'an emoji': ['k😀', 'non-ASCII character U+1F600 at index 1'],
  'a lone surrogate': ['k\ud800', 'non-ASCII character U+D800 at index 1'],
};

describe('validateKey', () => {
  it('returns a valid key unchanged', () => {
    const uuid = crypto.randomUUID();
    expect(validateKey(uuid)).toBe(uuid);
    expect(validateKey('a')).toBe('a');
    expect(validateKey(' ~!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}')).toBe(
      ' ~!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}',
    );
  });

  it('accepts 255 characters and refuses 256', () => {
    expect(MAX_KEY_LENGTH).toBe(255);
    expect(validateKey('k'.repeat(255))).toHaveLength(255);
    const error = refusal('k'.repeat(256));
    expect(error.reason).toBe('too_long');
    expect(error.code).toBe('INVALID_KEY');
    expect(error.message).toBe(
      'Idempotency key must be 1–255 printable ASCII characters (0x20–0x7E); got 256 characters. ' +
        'Use a UUID (crypto.randomUUID()).',
    );
  });

  it('refuses an empty key', () => {
    const error = refusal('');
    expect(error.reason).toBe('empty');
    expect(error.message).toMatch(/got an empty string/);
  });

  it.each([undefined, null, 42, {}, ['key']])('refuses %j as missing', (key) => {
    expect(refusal(key).reason).toBe('missing');
  });

  it.each(Object.entries(INVALID_CHARACTER_KEYS))(
    'refuses %s, naming the code point and never echoing it',
    (_name, [key, detail]) => {
      const error = refusal(key);
      expect(error.reason).toBe('invalid_character');
      expect(error.message).toContain(detail);
      expect(error.message).toContain('(0x20–0x7E)');
      const offending = [...key].find((character) => !/^[ -~]$/.test(character));
      expect(offending).toBeDefined();
      expect(error.message).not.toContain(offending);
    },
  );

  it('names the invalid character even in an over-long key', () => {
    expect(refusal(`${'k'.repeat(300)}\n`).reason).toBe('invalid_character');
  });

  it('accepts exactly the strings of 1–255 printable ASCII characters (property)', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 300 }), (key) => {
        const valid = key.length >= 1 && key.length <= 255 && /^[\x20-\x7e]*$/.test(key);
        if (valid) expect(validateKey(key)).toBe(key);
        else
          expect(() => validateKey(key)).toThrow(expect.objectContaining({ code: 'INVALID_KEY' }));
      }),
    );
  });
});
