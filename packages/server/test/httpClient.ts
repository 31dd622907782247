import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:net';
import { createTRPCClient, httpBatchLink, httpLink } from '@trpc/client';
import superjson from 'superjson';
import { DEFAULT_ERROR_DOCS_URL } from '../src/trpc/index.js';
import type { TestRouter } from './fixtures/testApp.js';

/** `data.idempotency` of an idem error with the default documentation link. */
export const idempotencyData = (code: string, rest: Record<string, unknown> = {}) => ({
  code,
  type: `${DEFAULT_ERROR_DOCS_URL}#${code.toLowerCase()}`,
  ...rest,
});

/** What came back from one raw tRPC HTTP call. */
export interface RawResponse {
  status: number;
  headers: Headers;
  /** The body exactly as sent. */
  text: string;
  /** `result.data`, deserialized with superjson, for a success. */
  data?: unknown;
  /** The error shape, deserialized with superjson, for a failure. */
  error?: {
    message: string;
    code: number;
    data: {
      code: string;
      httpStatus: number;
      path?: string;
      declineCode: string | null;
      idempotency?: {
        code: string;
        type?: string;
        retryAfterMs?: number;
        reason?: string;
        maxInputBytes?: number;
      };
    };
  };
}

function parse(status: number, headers: Headers, text: string): RawResponse {
  const body = JSON.parse(text) as {
    result?: { data: Parameters<typeof superjson.deserialize>[0] };
    error?: Parameters<typeof superjson.deserialize>[0];
  };
  const response: RawResponse = { status, headers, text };
  if (body.result) response.data = superjson.deserialize(body.result.data);
  if (body.error) {
    response.error = superjson.deserialize(body.error) as NonNullable<RawResponse['error']>;
  }
  return response;
}

/** POSTs one mutation the way httpLink does (superjson), with the headers given. */
export async function mutate(
  url: string,
  path: string,
  input: unknown,
  headers: Record<string, string> = {},
): Promise<RawResponse> {
  const response = await fetch(`${url}/trpc/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(superjson.serialize(input)),
  });
  return parse(response.status, response.headers, await response.text());
}

/** POSTs `body` exactly as given (malformed JSON, an empty body) to one procedure. */
export async function postRaw(
  url: string,
  path: string,
  body: string | undefined,
  headers: Record<string, string> = {},
): Promise<RawResponse> {
  const response = await fetch(`${url}/trpc/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    ...(body !== undefined && { body }),
  });
  return parse(response.status, response.headers, await response.text());
}

/** One batch the way httpBatchLink sends it: `POST /trpc/a,b?batch=1`, inputs by index. */
export async function mutateBatch(
  url: string,
  calls: { path: string; input: unknown }[],
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; results: RawResponse[] }> {
  const body = Object.fromEntries(
    calls.map((call, index) => [String(index), superjson.serialize(call.input)]),
  );
  const response = await fetch(`${url}/trpc/${calls.map((call) => call.path).join(',')}?batch=1`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const items = JSON.parse(await response.text()) as unknown[];
  return {
    status: response.status,
    headers: response.headers,
    results: items.map((item) =>
      parse('error' in (item as object) ? 0 : 200, response.headers, JSON.stringify(item)),
    ),
  };
}

/**
 * The same with node:http, which writes a header value's non-ASCII characters as raw bytes
 * (fetch refuses them), for keys with non-ASCII characters.
 */
export async function mutateLatin1(
  url: string,
  path: string,
  input: unknown,
  headers: Record<string, string>,
): Promise<RawResponse> {
  const body = JSON.stringify(superjson.serialize(input));
  const response = await nodePost(`${url}/trpc/${path}`, body, {
    'content-type': 'application/json',
    ...headers,
  });
  const responseHeaders = new Headers();
  for (const [name, value] of Object.entries(response.headers)) {
    if (typeof value === 'string') responseHeaders.set(name, value);
  }
  return parse(response.status, responseHeaders, response.text);
}

/**
 * A POST with node:http, which sends what fetch refuses or rewrites: a header value's
 * non-ASCII characters as raw bytes, a header given twice (an array), any body as it is.
 */
export function nodePost(
  url: string,
  body: string | Buffer | undefined,
  headers: Record<string, string | string[]>,
): Promise<{ status: number; text: string; headers: IncomingHttpHeaders }> {
  return nodeRequest('POST', url, body, headers);
}

/** {@link nodePost} with any method. */
export function nodeRequest(
  method: string,
  url: string,
  body: string | Buffer | undefined,
  headers: Record<string, string | string[]>,
): Promise<{ status: number; text: string; headers: IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          text: Buffer.concat(chunks).toString('utf8'),
          headers: res.headers,
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * Writes a request byte for byte on a TCP socket, so that a test can send what no HTTP
 * client would (a bare CR inside a header value), and returns the status line and body.
 */
export function sendRaw(
  url: string,
  head: string,
  body: string,
): Promise<{ statusLine: string; text: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      socket.end(
        `${head}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
    });
    const chunks: Buffer[] = [];
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      resolve({ statusLine: text.split('\r\n')[0] ?? '', text });
    });
  });
}

/** Context an operation of the tRPC clients below can carry. */
export interface CallContext {
  idempotencyKey?: string;
  user?: string;
}

/**
 * A tRPC client with httpLink that sends `context.idempotencyKey` as `Idempotency-Key` and
 * `context.user` as `x-user`.
 */
export function singleClient(url: string) {
  return createTRPCClient<TestRouter>({
    links: [
      httpLink({
        url: `${url}/trpc`,
        transformer: superjson,
        headers: ({ op }) => {
          const context = op.context as CallContext;
          return {
            ...(context.idempotencyKey !== undefined && {
              'Idempotency-Key': context.idempotencyKey,
            }),
            ...(context.user !== undefined && { 'x-user': context.user }),
          };
        },
      }),
    ],
  });
}

/**
 * A tRPC client with httpBatchLink that sends the keys of a batch in
 * `Idempotency-Key-Batch`, and records the response headers of every batch it sends.
 */
export function batchClient(url: string) {
  const responses: Headers[] = [];
  const client = createTRPCClient<TestRouter>({
    links: [
      httpBatchLink({
        url: `${url}/trpc`,
        transformer: superjson,
        headers: ({ opList }) => {
          const keys: Record<string, string> = {};
          opList.forEach((op, index) => {
            const key = (op.context as CallContext).idempotencyKey;
            if (key !== undefined) keys[String(index)] = key;
          });
          return Object.keys(keys).length > 0
            ? { 'Idempotency-Key-Batch': JSON.stringify(keys) }
            : {};
        },
        fetch: async (input, init) => {
          const response = await fetch(input, init as RequestInit);
          responses.push(response.headers);
          return response;
        },
      }),
    ],
  });
  return { client, responses };
}
