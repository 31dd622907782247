import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { builtinCrypto, builtinSha256Hex } from './builtinCrypto.js';
import { canonicalJson } from './canonicalJson.js';
import { fingerprint, fingerprintNow, sha256Hex, webCryptoSha256Hex } from './fingerprint.js';

describe('sha256Hex', () => {
  it('matches known SHA-256 vectors', async () => {
    expect(await sha256Hex('')).toBe(
      'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    );
    expect(await sha256Hex('abc')).toBe(
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
  });

  it('hashes the UTF-8 bytes, like node:crypto (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: 'grapheme' }), async (text) => {
        expect(await sha256Hex(text)).toBe(createHash('sha256').update(text, 'utf8').digest('hex'));
      }),
    );
  });
});

describe('fingerprint', () => {
  it('is the SHA-256 of the canonical JSON', async () => {
    const value = { path: 'order.create', input: { sku: 'A1', qty: 2 } };
    expect(await fingerprint(value)).toBe(await sha256Hex(canonicalJson(value)));
    expect(await fingerprint(value)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('ignores key order', async () => {
    expect(await fingerprint({ path: 'p', input: { a: 1, b: [1, { c: 2, d: 3 }] } })).toBe(
      await fingerprint({ input: { b: [1, { d: 3, c: 2 }], a: 1 }, path: 'p' }),
    );
  });

  it('is equal for equal values (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.anything({ withBigInt: true, withDate: true, withMap: true, withSet: true }),
        async (value) => {
          const copy = structuredClone(value);
          expect(await fingerprint(copy)).toBe(await fingerprint(value));
        },
      ),
    );
  });

  it('differs for different values', async () => {
    const values: unknown[] = [
      null,
      undefined,
      0,
      1,
      '0',
      '',
      true,
      false,
      [],
      {},
      [null],
      { a: 1 },
      { a: '1' },
      { a: 1, b: 2 },
      { a: [1, 2] },
      { a: [2, 1] },
      1n,
      new Date(0),
      new Date(1),
      new Map([[1, 2]]),
      new Set([1, 2]),
      Number.NaN,
      Number.POSITIVE_INFINITY,
      { path: 'order.create', input: { qty: 1 } },
      { path: 'order.create', input: { qty: 2 } },
      { path: 'order.cancel', input: { qty: 1 } },
    ];
    const fingerprints = await Promise.all(values.map((value) => fingerprint(value)));
    expect(new Set(fingerprints).size).toBe(values.length);
  });

  it('differs when any leaf of the input changes (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.dictionary(fc.string(), fc.integer()),
        fc.string(),
        fc.integer(),
        async (input, key, delta) => {
          fc.pre(delta !== 0);
          const changed = { ...input, [key]: (input[key] ?? 0) + delta };
          expect(await fingerprint(changed)).not.toBe(await fingerprint(input));
        },
      ),
    );
  });
});

describe('the hash behind fingerprints', () => {
  it('is node:crypto, synchronous, on Node', () => {
    expect(builtinCrypto).toBeDefined();
    const value = { path: 'order.create', input: { sku: 'A1', qty: 2 } };
    const now = fingerprintNow(value);
    expect(typeof now).toBe('string');
    expect(now).toBe(createHash('sha256').update(canonicalJson(value), 'utf8').digest('hex'));
  });

  it("is node:crypto's one-shot digest where it has one, the same as a Hash object's (property)", () => {
    expect(builtinCrypto?.hash).toBeTypeOf('function');
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (text) => {
        expect(builtinSha256Hex?.(text)).toBe(
          createHash('sha256').update(text, 'utf8').digest('hex'),
        );
      }),
    );
  });

  it('is Web Crypto where node:crypto is missing, with the same digest (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: 'grapheme' }), async (text) => {
        expect(await webCryptoSha256Hex(text)).toBe(await sha256Hex(text));
      }),
    );
  });
});
