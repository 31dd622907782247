import { randomUUID } from 'node:crypto';
import superjson from 'superjson';
import { describe, expect, it } from 'vitest';
import { useTestApp } from './fixtures/testApp.js';
import { backends } from './harness.js';
import { mutate, postRaw } from './httpClient.js';

const modes = [
  { mode: 'lease', path: 'validated' },
  { mode: 'transaction', path: 'txValidated' },
] as const;

for (const backend of backends) {
  describe(`idempotent(): a call that never reaches the procedure stores nothing, on ${backend}`, () => {
    const app = useTestApp(backend);

    const body = (input: unknown) => JSON.stringify(superjson.serialize(input));

    for (const { mode, path } of modes) {
      it(`${mode} mode: malformed JSON is a 400 that leaves the key free for the corrected body`, async () => {
        const key = randomUUID();
        const tag = randomUUID();
        const valid = body({ tag, cents: 1 });
        const broken = await postRaw(app().url, path, valid.slice(0, -2), {
          'Idempotency-Key': key,
        });
        expect(broken.status).toBe(400);
        expect(broken.headers.get('idempotent-replayed')).toBeNull();
        expect(await app().storedKeys(key)).toBe(0);

        // Another malformed body, and an empty one, are not answered from a store either.
        const other = await postRaw(app().url, path, '{"json":', { 'Idempotency-Key': key });
        const empty = await postRaw(app().url, path, undefined, { 'Idempotency-Key': key });
        for (const response of [other, empty]) {
          expect(response.status).toBe(400);
          expect(response.headers.get('idempotent-replayed')).toBeNull();
        }
        expect(await app().storedKeys(key)).toBe(0);

        const fixed = await postRaw(app().url, path, valid, { 'Idempotency-Key': key });
        expect(fixed.status).toBe(200);
        expect(fixed.data).toEqual({ execution: 1, cents: 1 });
        expect(app().executionsOf(tag)).toBe(1);
        expect(await app().storedKeys(key)).toBe(1);
      });

      it(`${mode} mode: input that fails validation is a 400 that stores nothing; the fixed input runs`, async () => {
        const key = randomUUID();
        const tag = randomUUID();
        const invalid = await mutate(
          app().url,
          path,
          { tag, cents: 'lots' },
          { 'Idempotency-Key': key },
        );
        expect(invalid.status).toBe(400);
        expect(invalid.error?.data.code).toBe('BAD_REQUEST');
        expect(invalid.error?.message).toContain('cents');
        expect(await app().storedKeys(key)).toBe(0);
        const again = await mutate(
          app().url,
          path,
          { tag, cents: 'lots' },
          { 'Idempotency-Key': key },
        );
        expect(again.headers.get('idempotent-replayed')).toBeNull();
        expect(again.text).toBe(invalid.text);

        const fixed = await mutate(app().url, path, { tag, cents: 7 }, { 'Idempotency-Key': key });
        expect(fixed.status).toBe(200);
        expect(fixed.data).toEqual({ execution: 1, cents: 7 });
        const replay = await mutate(app().url, path, { tag, cents: 7 }, { 'Idempotency-Key': key });
        expect(replay.headers.get('idempotent-replayed')).toBe('true');
        expect(app().executionsOf(tag)).toBe(1);
        expect(await app().storedKeys(key)).toBe(1);
      });
    }

    const validators = [
      {
        kind: 'a schema, then a validator function (two .input()s)',
        path: 'twiceValidated',
        refused: { cents: 101 },
        says: 'cents must be at most 100',
      },
      {
        kind: 'a Standard Schema alone',
        path: 'standardValidated',
        refused: { cents: -1 },
        says: 'cents must be a positive number',
      },
    ];
    for (const { kind, path, refused, says } of validators) {
      it(`${kind}: a refused input is tRPC's 400 and stores nothing; the fixed input runs`, async () => {
        const key = randomUUID();
        const tag = randomUUID();
        const invalid = await mutate(
          app().url,
          path,
          { tag, ...refused },
          { 'Idempotency-Key': key },
        );
        expect(invalid.status).toBe(400);
        expect(invalid.error?.data.code).toBe('BAD_REQUEST');
        expect(invalid.error?.message).toContain(says);
        expect(app().executionsOf(tag)).toBe(0);
        expect(await app().storedKeys(key)).toBe(0);

        const fixed = await mutate(app().url, path, { tag, cents: 9 }, { 'Idempotency-Key': key });
        expect(fixed.status).toBe(200);
        expect(fixed.data).toEqual({ execution: 1, cents: 9 });
        expect(await app().storedKeys(key)).toBe(1);
      });
    }

    it('a mutation without input parsers runs whatever the body, as a call without input', async () => {
      const key = randomUUID();
      const before = app().executionsOf('no-input');
      const first = await postRaw(app().url, 'noInput', undefined, { 'Idempotency-Key': key });
      const second = await postRaw(app().url, 'noInput', '{"json":', { 'Idempotency-Key': key });
      expect(first.status).toBe(200);
      expect(second.headers.get('idempotent-replayed')).toBe('true');
      expect(app().executionsOf('no-input')).toBe(before + 1);
    });
  });
}
