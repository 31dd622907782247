/**
 * A response as the store keeps it: status, the allow-listed headers, and the body,
 * as text when it is valid UTF-8 (readable in the table) and as base64 otherwise. Both
 * give back the same bytes: the decoder keeps a byte-order mark and refuses invalid UTF-8.
 */
export interface StoredResponse {
  status: number;
  statusText?: string;
  headers: [name: string, value: string][];
  body: string;
  encoding: 'utf8' | 'base64';
}

/**
 * The response headers a replay carries by default: those that describe the body or the
 * resource the request made. Per-connection and per-user headers (`set-cookie`, `date`,
 * `content-length`, tracing ids) are left out: a replay is not the first request's session.
 */
export const DEFAULT_REPLAY_HEADERS: readonly string[] = [
  'content-type',
  'content-encoding',
  'content-language',
  'content-disposition',
  'content-location',
  'location',
  'link',
  'etag',
  'last-modified',
  'cache-control',
];

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const encoder = new TextEncoder();

/** The response's body, whole, and what the store keeps of it. */
export async function storeResponse(
  response: Response,
  replayHeaders: ReadonlySet<string>,
): Promise<{ bytes: Uint8Array; stored: StoredResponse }> {
  const bytes = new Uint8Array(await response.arrayBuffer());
  const headers: [string, string][] = [];
  // Headers iterate with lower-case names; set-cookie lines come one by one.
  for (const [name, value] of response.headers) {
    if (replayHeaders.has(name)) headers.push([name, value]);
  }
  const stored: StoredResponse = { status: response.status, headers, ...encodeBody(bytes) };
  if (response.statusText) stored.statusText = response.statusText;
  return { bytes, stored };
}

/** Bytes as text when they are valid UTF-8, else as base64; `decodeBody` gives them back. */
export function encodeBody(bytes: Uint8Array): Pick<StoredResponse, 'body' | 'encoding'> {
  try {
    return { body: strictUtf8.decode(bytes), encoding: 'utf8' };
  } catch {
    return { body: toBase64(bytes), encoding: 'base64' };
  }
}

/** The response a replay sends: the stored status, headers and body bytes. */
export function replayedResponse(
  stored: StoredResponse,
  extraHeaders: Record<string, string>,
): Response {
  const headers = new Headers(stored.headers);
  for (const [name, value] of Object.entries(extraHeaders)) headers.set(name, value);
  const bytes =
    stored.encoding === 'base64' ? fromBase64(stored.body) : encoder.encode(stored.body);
  return new Response(nullBodyStatus(stored.status) ? null : (bytes as BodyInit), {
    status: stored.status,
    ...(stored.statusText !== undefined && { statusText: stored.statusText }),
    headers,
  });
}

/** Statuses whose responses must not have a body (fetch throws otherwise). */
export function nullBodyStatus(status: number): boolean {
  return status === 101 || status === 204 || status === 205 || status === 304;
}

// btoa/atob rather than Buffer: they exist in every runtime a Fetch handler runs in (Node,
// Bun, Deno, edge workers).
function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (let index = 0; index < bytes.length; index += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(index, index + 0x8000));
  }
  return btoa(binary);
}

function fromBase64(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let index = 0; index < binary.length; index++) bytes[index] = binary.charCodeAt(index);
  return bytes;
}
