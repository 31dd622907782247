import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import { DEFAULT_ERROR_DOCS_URL, errorTypeUrl } from '../../src/adapter/errorDocs.js';
import { sendRaw } from '../httpClient.js';
import type { ContractRoute, ContractTarget, HttpAnswer } from './ContractTarget.js';

const ALLOWED = '1–255 printable ASCII characters (0x20–0x7E)';
const docsLink = (code: string) => errorTypeUrl(DEFAULT_ERROR_DOCS_URL, code);

/**
 * idem's HTTP contract, for any endpoint style: the cases whose answer does not depend on
 * how the endpoint frames its body (tRPC's envelope or a plain response). Call it inside a
 * `describe` that serves `target`.
 */
export function httpContract(target: () => ContractTarget): void {
  const post = async (
    route: ContractRoute,
    input: unknown,
    headers: Record<string, string> = {},
  ): Promise<HttpAnswer> => postRaw(route, JSON.stringify(input), headers);
  const postRaw = async (
    route: ContractRoute,
    json: string | undefined,
    headers: Record<string, string> = {},
  ): Promise<HttpAnswer> => {
    const { url, pathOf, bodyOf } = target();
    const response = await fetch(`${url}${pathOf(route)}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      ...(json !== undefined && { body: bodyOf(json) }),
    });
    return { status: response.status, headers: response.headers, text: await response.text() };
  };
  const keyed = (key: string, user = 'ann') => ({ 'Idempotency-Key': key, 'x-user': user });

  it('refuses a request without a key with 400 INVALID_KEY (missing), naming the header; nothing runs', async () => {
    const tag = randomUUID();
    const answer = await post('echo', { tag }, { 'x-user': 'ann' });
    expect(answer.status).toBe(400);
    expect(target().idempotencyOf(answer)).toMatchObject({
      code: 'INVALID_KEY',
      type: docsLink('INVALID_KEY'),
      reason: 'missing',
    });
    expect(answer.text).toContain('Idempotency-Key');
    expect(answer.text).toContain(ALLOWED);
    expect(target().executionsOf(tag)).toBe(0);
  });

  it("the draft's quoted spelling and Stripe's bare spelling are one key", async () => {
    const key = randomUUID();
    const tag = randomUUID();
    const bare = await post('echo', { tag }, keyed(key));
    const quoted = await post('echo', { tag }, keyed(`"${key}"`));
    expect(bare.status).toBe(200);
    expect(bare.headers.get('idempotent-replayed')).toBeNull();
    expect(quoted.headers.get('idempotent-replayed')).toBe('true');
    expect(quoted.text).toBe(bare.text);
    expect(target().executionsOf(tag)).toBe(1);
    expect(await target().storedKeys(key)).toBe(1);
    expect(await target().storedKeys(`"${key}"`)).toBe(0);
  });

  it('refuses two Idempotency-Key fields (raw socket) with 400 malformed_header; nothing runs or is stored', async () => {
    const key = randomUUID();
    const tag = randomUUID();
    for (const [first, second] of [
      [`${key}-a`, `${key}-b`],
      [`"${key}-a"`, `"${key}-b"`],
      // Joined, these read as one quoted key with a comma in it: "<key>-a, <key>-b".
      [`"${key}-a`, `${key}-b"`],
    ]) {
      const { statusLine, text } = await sendRaw(
        target().url,
        `POST ${target().pathOf('echo')} HTTP/1.1\r\nhost: 127.0.0.1\r\n` +
          'content-type: application/json\r\nx-user: ann\r\n' +
          `idempotency-key: ${first}\r\nidempotency-key: ${second}`,
        target().bodyOf(JSON.stringify({ tag })),
      );
      expect(statusLine).toMatch(/^HTTP\/1\.1 400 /);
      expect(text).toMatch(/more than one Idempotency-Key|two Idempotency-Key fields/);
      expect(text).toContain('malformed_header');
    }
    expect(target().executionsOf(tag)).toBe(0);
    expect(await target().storedKeys(`${key}-a`)).toBe(0);
    expect(await target().storedKeys(`${key}-b`)).toBe(0);
    expect(await target().storedKeys(`${key}-a, ${key}-b`)).toBe(0);
  });

  it.each([
    { what: 'an empty key', key: '', reason: 'empty' },
    { what: 'a 256-character key', key: 'k'.repeat(256), reason: 'too_long' },
    { what: 'a key with a tab', key: 'abc\tdef', reason: 'invalid_character' },
    { what: 'an unterminated quoted key', key: '"abc', reason: 'malformed_header' },
  ])('refuses $what with 400 INVALID_KEY ($reason), never a 500', async ({ key, reason }) => {
    const tag = randomUUID();
    const answer = await post('echo', { tag }, keyed(key));
    expect(answer.status).toBe(400);
    expect(target().idempotencyOf(answer)).toMatchObject({ code: 'INVALID_KEY', reason });
    expect(target().executionsOf(tag)).toBe(0);
  });

  it('the same key with another body is 422 KEY_MISMATCH, linked to its documentation; nothing runs', async () => {
    const key = randomUUID();
    const tag = randomUUID();
    const first = await post('echo', { tag, payload: 1 }, keyed(key));
    expect(first.status).toBe(200);
    const other = await post('echo', { tag, payload: 2 }, keyed(key));
    expect(other.status).toBe(422);
    expect(target().idempotencyOf(other)).toMatchObject({
      code: 'KEY_MISMATCH',
      type: docsLink('KEY_MISMATCH'),
    });
    expect(other.headers.get('idempotent-replayed')).toBeNull();
    // Key order in the body is not a difference.
    const reordered = await postRaw(
      'echo',
      `{"payload":1,"tag":${JSON.stringify(tag)}}`,
      keyed(key),
    );
    expect(reordered.headers.get('idempotent-replayed')).toBe('true');
    expect(target().executionsOf(tag)).toBe(1);
  });

  it('keys are per principal: the same key from another user runs on its own', async () => {
    const key = randomUUID();
    const tag = randomUUID();
    const ann = await post('echo', { tag }, keyed(key, 'ann'));
    const bob = await post('echo', { tag }, keyed(key, 'bob'));
    expect(bob.status).toBe(200);
    expect(bob.headers.get('idempotent-replayed')).toBeNull();
    expect(bob.text).not.toBe(ann.text);
    expect(target().executionsOf(tag)).toBe(2);
  });

  it('a duplicate while the first runs is 409 REQUEST_IN_PROGRESS with Retry-After, then a replay', async () => {
    const key = randomUUID();
    const tag = randomUUID();
    const first = post('gated', { tag }, keyed(key));
    await target().gates.arrived(tag);
    const busy = await post('gated', { tag }, keyed(key));
    expect(busy.status).toBe(409);
    const idempotency = target().idempotencyOf(busy);
    expect(idempotency).toMatchObject({
      code: 'REQUEST_IN_PROGRESS',
      type: docsLink('REQUEST_IN_PROGRESS'),
    });
    expect(idempotency?.retryAfterMs).toBeGreaterThanOrEqual(0);
    expect(busy.headers.get('idempotency-status')).toBe('in-progress');
    expect(busy.headers.get('retry-after')).toBe(
      String(Math.ceil((idempotency?.retryAfterMs ?? 0) / 1000)),
    );
    target().gates.open(tag);
    const done = await first;
    expect(done.status).toBe(200);
    const replay = await post('gated', { tag }, keyed(key));
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.text).toBe(done.text);
    expect(target().executionsOf(tag)).toBe(1);
  });

  it('a replay says Idempotent-Replayed: true and sends the first body byte for byte', async () => {
    const key = randomUUID();
    const tag = randomUUID();
    const payload = { text: 'zürich ☕ "quoted"', list: [1, 2.5, null], nested: { deep: true } };
    const first = await post('echo', { tag, payload }, keyed(key));
    const replays = await Promise.all(
      [1, 2, 3].map(() => post('echo', { tag, payload }, keyed(key))),
    );
    expect(first.status).toBe(200);
    expect(target().resultOf(first)).toMatchObject({ tag, user: 'ann', payload, execution: 1 });
    for (const replay of replays) {
      expect(replay.status).toBe(200);
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.text).toBe(first.text);
    }
    expect(target().executionsOf(tag)).toBe(1);
  });

  it('bad input is a 4xx, never a 500: a malformed body, one nested too deep, a bad key', async () => {
    const tag = randomUUID();
    const deep = `{"tag":${JSON.stringify(tag)},"payload":${'{"a":'.repeat(2_000)}1${'}'.repeat(2_000)}}`;
    const answers = [
      await postRaw('validated', '{"tag":', keyed(randomUUID())),
      await postRaw('echo', deep, keyed(randomUUID())),
      await post('echo', { tag }, keyed('"a\\x"')),
      await post('echo', { tag }, keyed('a, b')),
    ];
    for (const answer of answers) {
      expect(answer.status).toBeGreaterThanOrEqual(400);
      expect(answer.status).toBeLessThan(500);
      expect(answer.text).not.toMatch(/insert into|select |idem_keys|\n\s+at |\.ts:\d+/i);
    }
    expect(target().executionsOf(tag)).toBe(0);
  });

  it('data may nest 1,000 levels; 1,001 is a 400 UNSERIALIZABLE_VALUE with a short message, whatever its numbers', async () => {
    // The body's object is one level, its payload's arrays the rest.
    const nested = (tag: string, levels: number, bottom: string) =>
      `{"tag":${JSON.stringify(tag)},"payload":${'['.repeat(levels - 1)}${bottom}${']'.repeat(levels - 1)}}`;
    for (const bottom of ['1', '1e400', '9007199254740993']) {
      const tag = randomUUID();
      const fits = await postRaw('echo', nested(tag, 1_000, bottom), keyed(randomUUID()));
      expect({ bottom, status: fits.status }).toEqual({ bottom, status: 200 });
      const key = randomUUID();
      const deeper = await postRaw('echo', nested(tag, 1_001, bottom), keyed(key));
      expect({ bottom, status: deeper.status }).toEqual({ bottom, status: 400 });
      expect(target().idempotencyOf(deeper)).toMatchObject({ code: 'UNSERIALIZABLE_VALUE' });
      expect(deeper.text).toContain('nested more than 1000 levels deep');
      expect(target().executionsOf(tag)).toBe(1);
      expect(await target().storedKeys(key)).toBe(0);
    }
    // The message quotes the start of where the nesting broke, not the client's whole path.
    const name = 'n'.repeat(300);
    const named = `{"tag":"t",${`"${name}":{`.repeat(1_000)}"end":1${'}'.repeat(1_001)}`;
    const refused = await postRaw('echo', named, keyed(randomUUID()));
    expect(refused.status).toBe(400);
    expect(refused.text.length).toBeLessThan(2_000);
    expect(refused.text).toContain('(1000 levels)');
  });

  it('bad input stores nothing: the key stays free for the corrected request', async () => {
    const key = randomUUID();
    const tag = randomUUID();
    const valid = JSON.stringify({ tag, cents: 1 });
    const broken = await postRaw('validated', valid.slice(0, -2), keyed(key));
    expect(broken.status).toBe(400);
    expect(broken.headers.get('idempotent-replayed')).toBeNull();
    const empty = await postRaw('validated', undefined, keyed(key));
    expect(empty.status).toBe(400);
    expect(empty.headers.get('idempotent-replayed')).toBeNull();
    expect(await target().storedKeys(key)).toBe(0);

    const fixed = await postRaw('validated', valid, keyed(key));
    expect(fixed.status).toBe(200);
    expect(target().resultOf(fixed)).toEqual({ execution: 1, cents: 1 });
    const replay = await postRaw('validated', valid, keyed(key));
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(target().executionsOf(tag)).toBe(1);
    expect(await target().storedKeys(key)).toBe(1);
  });
}
