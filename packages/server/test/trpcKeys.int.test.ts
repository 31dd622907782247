import { randomUUID } from 'node:crypto';
import { TRPCError } from '@trpc/server';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { idempotencyContext } from '../src/trpc/index.js';
import { useTestApp } from './fixtures/testApp.js';
import { backends, rows } from './harness.js';
import { idempotencyData, mutate, mutateBatch, mutateLatin1, sendRaw } from './httpClient.js';

const ALLOWED = '1–255 printable ASCII characters (0x20–0x7E)';

/** JSON with every non-ASCII character escaped, as a header value must be. */
const asciiJson = (value: unknown) =>
  JSON.stringify(value).replace(
    /[\u007f-\uffff]/g,
    (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );

for (const backend of backends) {
  describe(`idempotent(): keys and inputs over HTTP on ${backend}`, () => {
    const app = useTestApp(backend);
    /** A call of the echo procedure for `tag`. */
    const echo = (tag: string, headers: Record<string, string> = {}) =>
      mutate(app().url, 'echo', { tag }, headers);

    it('refuses a mutation without a key with 400, naming the header and what a key is', async () => {
      const tag = randomUUID();
      const response = await echo(tag);
      expect(response.status).toBe(400);
      expect(response.error?.data.code).toBe('BAD_REQUEST');
      expect(response.error?.data.idempotency).toEqual(
        idempotencyData('INVALID_KEY', { reason: 'missing' }),
      );
      expect(response.error?.message).toContain('Idempotency-Key');
      expect(response.error?.message).toContain(ALLOWED);
      expect(app().executionsOf(tag)).toBe(0);
    });

    it.each([
      { what: 'an empty key', key: '', reason: 'empty', detail: 'an empty string' },
      {
        what: 'a 256-character key',
        key: 'k'.repeat(256),
        reason: 'too_long',
        detail: '256 characters',
      },
      {
        what: 'a key with a tab (a control character HTTP lets through)',
        key: 'abc\tdef',
        reason: 'invalid_character',
        detail: 'control character U+0009',
      },
    ])('refuses $what with 400 saying what is allowed', async ({ key, reason, detail }) => {
      const tag = randomUUID();
      const response = await echo(tag, { 'Idempotency-Key': key });
      expect(response.status).toBe(400);
      expect(response.error?.data.idempotency).toEqual(idempotencyData('INVALID_KEY', { reason }));
      expect(response.error?.message).toContain(ALLOWED);
      expect(response.error?.message).toContain(detail);
      expect(app().executionsOf(tag)).toBe(0);
    });

    it('refuses a non-ASCII key (raw bytes in the header) with 400, without echoing it', async () => {
      const tag = randomUUID();
      const response = await mutateLatin1(
        app().url,
        'echo',
        { tag },
        { 'Idempotency-Key': 'clé-1' },
      );
      expect(response.status).toBe(400);
      expect(response.error?.data.idempotency?.reason).toBe('invalid_character');
      // node:http writes the é as UTF-8; the server reads header bytes as Latin-1: "Ã©".
      expect(response.error?.message).toContain('non-ASCII character U+00C3 at index 2');
      expect(response.error?.message).not.toContain('clé');
      expect(app().executionsOf(tag)).toBe(0);
    });

    it('refuses header-injection attempts carried in the batch header (CRLF, NUL, emoji)', async () => {
      for (const [key, detail] of [
        ['abc\r\nSet-Cookie: session=stolen', 'control character U+000D'],
        ['abc\u0000', 'control character U+0000'],
        ['order-😀', 'non-ASCII character U+1F600'],
      ] as const) {
        const tag = randomUUID();
        const batch = await mutateBatch(app().url, [{ path: 'echo', input: { tag } }], {
          'Idempotency-Key-Batch': asciiJson({ 0: key }),
        });
        const [result] = batch.results;
        expect(result?.error?.data.httpStatus).toBe(400);
        expect(result?.error?.data.idempotency?.code).toBe('INVALID_KEY');
        expect(result?.error?.message).toContain(ALLOWED);
        expect(result?.error?.message).toContain(detail);
        expect(batch.headers.get('set-cookie')).toBeNull();
        expect(app().executionsOf(tag)).toBe(0);
      }
    });

    it('a bare CR inside Idempotency-Key is refused by the HTTP parser before it reaches tRPC', async () => {
      const tag = randomUUID();
      const body = JSON.stringify({ json: { tag } });
      const { statusLine } = await sendRaw(
        app().url,
        `POST /trpc/echo HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nidempotency-key: abc\rx-injected: 1`,
        body,
      );
      expect(statusLine).toMatch(/^HTTP\/1\.1 400 /);
      expect(app().executionsOf(tag)).toBe(0);
    });

    it('accepts a 255-character key of every printable ASCII character but the comma, sent as a Structured Field string', async () => {
      const printable = Array.from({ length: 0x7f - 0x20 }, (_, index) =>
        String.fromCharCode(0x20 + index),
      )
        .join('')
        .replace(',', '');
      const key = `${printable}${printable}${printable}`.slice(0, 255).replace(/^ /, '!');
      const tag = randomUUID();
      const quote = (text: string) => `"${text.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
      const response = await echo(tag, { 'Idempotency-Key': quote(key) });
      expect(response.status).toBe(200);
      expect(await app().storedKeys(key)).toBe(1);
      // tRPC's fetch adapter joins repeated fields: a comma in a quoted key reads as two
      // fields "a and b" would, so it is refused rather than guessed at.
      const withComma = await echo(tag, {
        'Idempotency-Key': quote(`${key.slice(0, 100)},${key.slice(100, 200)}`),
      });
      expect(withComma.status).toBe(400);
      expect(withComma.error?.message).toContain('Use a key without a comma');
      expect(app().executionsOf(tag)).toBe(1);
    });

    it('refuses two Idempotency-Key lines (raw socket) with 400; nothing runs or is stored', async () => {
      const key = randomUUID();
      const tag = randomUUID();
      const body = JSON.stringify({ json: { tag } });
      const { statusLine, text } = await sendRaw(
        app().url,
        'POST /trpc/echo HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n' +
          `idempotency-key: ${key}-a\r\nidempotency-key: ${key}-b`,
        body,
      );
      expect(statusLine).toMatch(/^HTTP\/1\.1 400 /);
      expect(text).toContain('more than one Idempotency-Key');
      expect(text).toContain('malformed_header');
      expect(app().executionsOf(tag)).toBe(0);
      const stored = await rows<{ n: number }>(
        app().db,
        sql`select count(*)::int as n from idem_keys where key like ${`${key}%`}`,
      );
      expect(stored[0]?.n).toBe(0);
      // Two quoted fields too.
      const quoted = await sendRaw(
        app().url,
        'POST /trpc/echo HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n' +
          `idempotency-key: "${key}-a"\r\nidempotency-key: "${key}-b"`,
        body,
      );
      expect(quoted.statusLine).toMatch(/^HTTP\/1\.1 400 /);
      expect(app().executionsOf(tag)).toBe(0);
    });

    it('refuses an input over maxInputBytes with 413, and stores nothing', async () => {
      const key = randomUUID();
      const tag = randomUUID();
      /** A call of the small procedure (maxInputBytes 1024) under `key`. */
      const small = (payload: string) =>
        mutate(app().url, 'small', { tag, payload }, { 'Idempotency-Key': key });
      const response = await small('x'.repeat(2_000));
      expect(response.status).toBe(413);
      expect(response.error?.data.code).toBe('PAYLOAD_TOO_LARGE');
      expect(response.error?.message).toContain('1024 bytes');
      expect(app().executionsOf(tag)).toBe(0);
      expect(await app().storedKeys(key)).toBe(0);
      // Bytes, not characters: 400 three-byte characters are over 1024 bytes.
      const wide = await small('€'.repeat(400));
      expect(wide.status).toBe(413);
      const fits = await small('x');
      expect(fits.status).toBe(200);
    });

    it('with required: false, runs a call without a key unprotected, and protects one with a key', async () => {
      const tag = randomUUID();
      const first = await mutate(app().url, 'optionalKey', { tag });
      const second = await mutate(app().url, 'optionalKey', { tag });
      expect(first.data).toEqual({ protected: false, execution: 1 });
      expect(second.data).toEqual({ protected: false, execution: 2 });
      const key = randomUUID();
      const keyed = await mutate(app().url, 'optionalKey', { tag }, { 'Idempotency-Key': key });
      const replay = await mutate(app().url, 'optionalKey', { tag }, { 'Idempotency-Key': key });
      expect(keyed.data).toEqual({ protected: true, execution: 3 });
      expect(replay.data).toEqual(keyed.data);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
    });

    it('refuses to run on a query: a configuration error that says to use it on mutations', async () => {
      const tag = randomUUID();
      const input = encodeURIComponent(JSON.stringify({ json: { tag } }));
      const response = await fetch(`${app().url}/trpc/notAMutation?input=${input}`, {
        headers: { 'Idempotency-Key': randomUUID() },
      });
      const body = (await response.json()) as { error: { json: { message: string } } };
      expect(response.status).toBe(500);
      expect(body.error.json.message).toContain('idempotent() is for mutations only');
      expect(body.error.json.message).toContain('"notAMutation" is a query');
      expect(app().executionsOf(tag)).toBe(0);
    });

    it('refuses keys in the wrong header for the request kind, and a malformed batch header', async () => {
      const tag = randomUUID();
      const single = await echo(tag, { 'Idempotency-Key-Batch': '{"0":"k"}' });
      expect(single.status).toBe(400);
      expect(single.error?.message).toContain('Idempotency-Key-Batch is for batch requests');

      for (const [headers, expected] of [
        [{ 'Idempotency-Key': randomUUID() }, 'carries its keys in Idempotency-Key-Batch'],
        [{ 'Idempotency-Key-Batch': 'not json' }, 'it is not valid JSON'],
        [{ 'Idempotency-Key-Batch': '["k"]' }, 'got a JSON array'],
        [{ 'Idempotency-Key-Batch': '{"first":"k"}' }, 'a member name is not a batch index'],
        [{ 'Idempotency-Key-Batch': '{"0":42}' }, 'is a JSON number, not a string'],
      ] as const) {
        const batch = await mutateBatch(app().url, [{ path: 'echo', input: { tag } }], headers);
        expect(batch.results[0]?.error?.data.httpStatus).toBe(400);
        expect(batch.results[0]?.error?.message).toContain(expected);
        expect(batch.results[0]?.error?.data.idempotency).toEqual(
          idempotencyData('INVALID_KEY', { reason: 'malformed_header' }),
        );
      }
      expect(single.error?.data.idempotency).toEqual(
        idempotencyData('INVALID_KEY', { reason: 'malformed_header' }),
      );
      expect(app().executionsOf(tag)).toBe(0);
    });

    it('protects a mutation without input, which httpLink sends with no body', async () => {
      const key = randomUUID();
      const before = app().executionsOf('no-input');
      // What httpLink without a transformer sends for a mutation without input.
      const send = () =>
        fetch(`${app().url}/trpc/noInput`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'Idempotency-Key': key },
        });
      const first = await send();
      const again = await send();
      expect(first.status).toBe(200);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(await again.text()).toBe(await first.text());
      expect(app().executionsOf('no-input')).toBe(before + 1);
    });

    it('works through createCaller with the key in idempotencyContext({ key })', async () => {
      const { createCaller } = app();
      const tag = randomUUID();
      const key = randomUUID();
      const context = () => ({ ...idempotencyContext({ key }), user: 'server-side' });
      const first = await createCaller(context()).echo({ tag });
      const resHeaders = new Headers();
      const again = await createCaller({
        ...idempotencyContext({ key, resHeaders }),
        user: 'server-side',
      }).echo({ tag });
      expect(again).toEqual(first);
      expect(resHeaders.get('idempotent-replayed')).toBe('true');
      expect(app().executionsOf(tag)).toBe(1);

      const missing = createCaller({ ...idempotencyContext({ key: undefined }), user: 'x' });
      await expect(missing.echo({ tag })).rejects.toMatchObject({
        code: 'BAD_REQUEST',
        message: expect.stringContaining('requires an idempotency key'),
      });
      const injected = createCaller({ ...idempotencyContext({ key: 'a\r\nb' }), user: 'x' });
      const error = await injected.echo({ tag }).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(TRPCError);
      expect(error).toMatchObject({
        code: 'BAD_REQUEST',
        message: expect.stringContaining(ALLOWED),
      });
      expect(app().executionsOf(tag)).toBe(1);
    });
  });
}
