import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sha256Hex, webCryptoSha256Hex } from './fingerprint.js';
import { sha256HexPortable, sha256HexSync } from './sha256Sync.js';

/** FIPS 180-4's test vectors: a text and its SHA-256. */
const VECTORS = [
  ['', 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'],
  ['abc', 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad'],
  [
    'abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq',
    '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1',
  ],
] as const;

// Each synchronous hash, and the asynchronous one it must agree with.
describe.each([
  { name: 'sha256HexSync', hash: sha256HexSync, reference: sha256Hex },
  {
    name: 'sha256HexPortable (the hash where node:crypto is missing)',
    hash: sha256HexPortable,
    reference: webCryptoSha256Hex,
  },
])('$name', ({ hash, reference }) => {
  it('matches the FIPS 180-4 test vectors', () => {
    for (const [text, digest] of VECTORS) expect(hash(text)).toBe(digest);
  });

  it('agrees with Web Crypto on any text, across block boundaries', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: 'grapheme', maxLength: 200 }), async (text) => {
        expect(hash(text)).toBe(await reference(text));
      }),
    );
  });
});
