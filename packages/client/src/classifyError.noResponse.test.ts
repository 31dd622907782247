import { InvalidKeyError } from '@idem/core';
import { createTRPCUntypedClient, httpLink } from '@trpc/client';
import { describe, expect, it } from 'vitest';
import { errorFromHttpLink, json } from '../test/httpLinkErrors.js';
import { classifyError } from './classifyError.js';
import { isOutcomeUnknown } from './isOutcomeUnknown.js';

// "No response" (a transport failure: the call may have run) against a bug, an abort or
// an error thrown before sending.

describe('classifyError on errors from the real httpLink', () => {
  it('a network failure is "no response"', async () => {
    const error = await errorFromHttpLink(async () => {
      throw new TypeError('fetch failed');
    });
    expect(classifyError(error)).toMatchObject({ outcome: 'no-response', transient: true });
  });

  it('a proxy’s HTML error page is "no response" (httpLink cannot show its status)', async () => {
    const error = await errorFromHttpLink(
      async () => new Response('<html>502 Bad Gateway</html>', { status: 502 }),
    );
    expect(classifyError(error)).toMatchObject({ outcome: 'no-response', transient: true });
  });

  it('a refused connection through the real fetch is "no response"', async () => {
    // Port 9 (discard) on loopback: nothing listens there, so the connection is refused.
    const client = createTRPCUntypedClient({
      links: [httpLink({ url: 'http://127.0.0.1:9/trpc' })],
    });
    const error = await client.query('thing.get').then(
      () => expect.unreachable(),
      (thrown: unknown) => thrown,
    );
    expect(classifyError(error)).toMatchObject({ outcome: 'no-response', transient: true });
  });

  it.each([
    ['Chromium', 'Failed to fetch'],
    ['Firefox', 'NetworkError when attempting to fetch resource.'],
    ['Safari', 'Load failed'],
    ['React Native', 'Network request failed'],
  ])('fetch’s network error as %s words it is "no response"', async (_runtime, message) => {
    const error = await errorFromHttpLink(async () => {
      throw new TypeError(message);
    });
    expect(classifyError(error)).toMatchObject({ outcome: 'no-response', transient: true });
  });

  it.each([
    'ECONNRESET',
    'ECONNREFUSED',
    'ETIMEDOUT',
    'EPIPE',
    'EAI_AGAIN',
    'UND_ERR_SOCKET',
    'UND_ERR_HEADERS_TIMEOUT',
  ])('a socket error %s anywhere in the cause chain is "no response"', async (code) => {
    const socketError = Object.assign(new Error(`connect ${code} 127.0.0.1:80`), { code });
    const wrapped = await errorFromHttpLink(async () => {
      throw new Error('custom fetch failed', { cause: socketError });
    });
    expect(classifyError(wrapped)).toMatchObject({ outcome: 'no-response', transient: true });
    const bare = await errorFromHttpLink(async () => {
      throw socketError;
    });
    expect(isOutcomeUnknown(bare)).toBe(true);
  });

  it('a TimeoutError (AbortSignal.timeout() in a custom fetch) is "no response"', async () => {
    const error = await errorFromHttpLink(async () => {
      throw new DOMException('The operation timed out.', 'TimeoutError');
    });
    expect(classifyError(error)).toMatchObject({ outcome: 'no-response', transient: true });
  });

  it('a TypeError thrown by the app’s own headers callback is a bug, not "no response"', async () => {
    const error = await errorFromHttpLink(
      async () => json({ result: { data: 1 } }, 200),
      'httpLink',
      () => {
        const session = undefined as unknown as { token: string };
        return { authorization: session.token };
      },
    );
    expect(error.cause?.name).toBe('TypeError');
    expect(classifyError(error)).toMatchObject({ outcome: 'other', transient: false });
  });

  it('a SyntaxError thrown by the app’s own code is a bug, not "no response"', async () => {
    const error = await errorFromHttpLink(
      async () => json({ result: { data: 1 } }, 200),
      'httpBatchLink',
      () => JSON.parse('{"authorization": Bearer}') as Record<string, string>,
    );
    expect(error.cause?.name).toBe('SyntaxError');
    expect(classifyError(error)).toMatchObject({ outcome: 'other', transient: false });
  });

  it('other TypeErrors from fetch (an invalid header value) are not "no response"', async () => {
    const error = await errorFromHttpLink(() =>
      fetch('http://127.0.0.1:9/', { headers: { 'x-a': 'b\r\nc' } }),
    );
    expect(error.cause?.name).toBe('TypeError');
    expect(classifyError(error)).toMatchObject({ outcome: 'other', transient: false });
  });

  it('an abort is neither a response nor retryable', async () => {
    const error = await errorFromHttpLink(async () => {
      throw new DOMException('This operation was aborted', 'AbortError');
    });
    expect(classifyError(error)).toMatchObject({ outcome: 'other', transient: false });
  });

  it('an error thrown before sending (an invalid key) is not retryable', () => {
    const error = new InvalidKeyError('empty', 'empty key');
    expect(classifyError(error)).toMatchObject({ outcome: 'other', transient: false });
  });
});
