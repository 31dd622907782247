import { problemOf, problemResponse } from './problemResponse.js';

/** Why a request body was not read: too large, or the stream failed. */
export type BodyProblem =
  | { kind: 'too_large'; maxBodyBytes: number }
  | { kind: 'unreadable'; cause: unknown };

/**
 * The request's body, whole, as long as it stays within `maxBodyBytes`: a declared
 * `Content-Length` over the limit is refused before a byte is read, and a streamed body
 * (no length, or a wrong one) is read chunk by chunk and cancelled as soon as it passes
 * the limit, so a huge or endless body costs at most the limit in memory.
 */
export async function readBody(
  request: Request,
  maxBodyBytes: number,
): Promise<{ ok: true; bytes: Uint8Array } | { ok: false; problem: BodyProblem }> {
  const declared = Number(request.headers.get('content-length') ?? Number.NaN);
  if (declared > maxBodyBytes) return { ok: false, problem: { kind: 'too_large', maxBodyBytes } };
  if (!request.body) return { ok: true, bytes: new Uint8Array(0) };
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let length = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      length += value.byteLength;
      if (length > maxBodyBytes) {
        // The rest is never read; the cancel must not wait for a client that stalls.
        reader.cancel().catch(() => undefined);
        return { ok: false, problem: { kind: 'too_large', maxBodyBytes } };
      }
      chunks.push(value);
    }
  } catch (cause) {
    return { ok: false, problem: { kind: 'unreadable', cause } };
  }
  const first = chunks[0];
  if (first !== undefined && chunks.length === 1) return { ok: true, bytes: first };
  const bytes = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return { ok: true, bytes };
}

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;
const decoder = new TextDecoder();

/**
 * The request's body read whole (`readBody`), as text, and parsed when its Content-Type
 * says JSON, with a copy of the request that carries it for the handler; or the problem
 * response that refuses it (413 over `maxBodyBytes`, 400 for a broken upload or a JSON
 * body that does not parse).
 */
export async function readRequest(
  request: Request,
  maxBodyBytes: number,
  docsUrl: string,
): Promise<
  | { ok: true; bytes: Uint8Array; text: string; json: unknown; body: Request }
  | { ok: false; response: Response }
> {
  const invalid = (detail: string) => ({
    ok: false as const,
    response: problemResponse(problemOf('INVALID_BODY', 400, detail, docsUrl)),
  });
  const read = await readBody(request, maxBodyBytes);
  if (!read.ok) {
    if (read.problem.kind === 'unreadable') {
      return invalid(
        'The request body could not be read (the upload broke off); it was not run or stored.',
      );
    }
    const detail =
      `The request body is larger than ${maxBodyBytes} bytes, the most this endpoint ` +
      'accepts (maxBodyBytes); it was not run or stored.';
    return {
      ok: false,
      response: problemResponse({
        ...problemOf('INPUT_TOO_LARGE', 413, detail, docsUrl),
        maxBodyBytes,
      }),
    };
  }
  const { bytes } = read;
  const text = decoder.decode(bytes);
  let json: unknown;
  if (JSON_TYPE.test(request.headers.get('content-type') ?? '')) {
    try {
      json = JSON.parse(text);
    } catch {
      return invalid(
        `The request says its body is JSON (Content-Type), but it is ${bytes.length === 0 ? 'empty' : 'not valid JSON'}; ` +
          'it was not run or stored.',
      );
    }
  }
  const method = request.method.toUpperCase();
  const body = new Request(request.url, {
    method: request.method,
    headers: request.headers,
    signal: request.signal,
    ...(method !== 'GET' && method !== 'HEAD' && { body: bytes as BodyInit }),
  });
  return { ok: true, bytes, text, json, body };
}
