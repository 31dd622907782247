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
  if (chunks.length === 1) return { ok: true, bytes: chunks[0]! };
  const bytes = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return { ok: true, bytes };
}
