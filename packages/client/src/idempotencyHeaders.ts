import { IDEMPOTENCY_KEY_BATCH_HEADER, IDEMPOTENCY_KEY_HEADER, validateKey } from '@idem/core';
import { formatKeyHeader } from '@idem/core/store';
import type { HTTPHeaders, Operation } from '@trpc/client';
import { idempotencyKeyOf } from './idempotencyKeyOf.js';
import { noteKeySent } from './keysOnWire.js';

/**
 * What httpLink (`{ op }`) and httpBatchLink (`{ opList }`) pass to their `headers`
 * callback.
 */
export type IdempotencyHeadersInput =
  | { op: Pick<Operation, 'context'> }
  | { opList: readonly Pick<Operation, 'context'>[] };

/** The app's own headers: a value or a callback, as httpLink and httpBatchLink accept. */
export type HeadersSource<TInput extends IdempotencyHeadersInput> =
  | HTTPHeaders
  | ((input: TInput) => HTTPHeaders | Promise<HTTPHeaders>);

export interface IdempotencyHeaders {
  /**
   * The idempotency headers for one request: `Idempotency-Key` for httpLink's single
   * operation, `Idempotency-Key-Batch` for an httpBatchLink batch (even a batch of one,
   * since the server reads a batch's keys by index). No header when no operation has a
   * key.
   */
  (input: IdempotencyHeadersInput): Record<string, string>;
  /**
   * Merges the app's own headers (an object, a `Headers`, or a sync or async callback)
   * with the idempotency headers. The idempotency headers win over any header of the
   * same name, in any letter case, so a request never carries two different keys.
   *
   * @example httpBatchLink({ url, headers: idempotencyHeaders.with(() => ({ authorization })) })
   */
  with<TInput extends IdempotencyHeadersInput>(
    headers: HeadersSource<TInput>,
  ): (input: TInput) => Promise<Record<string, string | string[]>>;
}

function headersFor(input: IdempotencyHeadersInput): Record<string, string> {
  if ('opList' in input) {
    const keys: Record<string, string> = {};
    let any = false;
    input.opList.forEach((op, batchIndex) => {
      const key = idempotencyKeyOf(op);
      if (key === undefined || key === null) return;
      const valid = validateKey(key);
      keys[String(batchIndex)] = valid;
      noteKeySent(valid);
      any = true;
    });
    return any ? { [IDEMPOTENCY_KEY_BATCH_HEADER]: JSON.stringify(keys) } : {};
  }
  const key = idempotencyKeyOf(input.op);
  if (key === undefined || key === null) return {};
  // Validated again here (idempotencyLink already did) because a key typed straight into
  // the context skips that link, and a CR or LF in a header value could inject headers.
  // A key the bare form would garble (a comma reads as two fields) goes quoted.
  const valid = validateKey(key);
  noteKeySent(valid);
  return { [IDEMPOTENCY_KEY_HEADER]: formatKeyHeader(valid) };
}

/**
 * The `headers` option for httpLink and httpBatchLink that sends each operation's
 * `context.idempotencyKey` in idem's wire format:
 *
 * ```ts
 * httpLink({ url, headers: idempotencyHeaders });
 * httpBatchLink({ url, headers: idempotencyHeaders });
 * httpBatchLink({ url, headers: idempotencyHeaders.with({ authorization: `Bearer ${token}` }) });
 * ```
 */
export const idempotencyHeaders: IdempotencyHeaders = Object.assign(headersFor, {
  with<TInput extends IdempotencyHeadersInput>(headers: HeadersSource<TInput>) {
    return async (input: TInput) => {
      const own = typeof headers === 'function' ? await headers(input) : headers;
      const merged = toRecord(own);
      const idempotency = headersFor(input);
      const ours = new Set(Object.keys(idempotency).map((name) => name.toLowerCase()));
      for (const name of Object.keys(merged)) {
        if (ours.has(name.toLowerCase())) delete merged[name];
      }
      return { ...merged, ...idempotency };
    };
  },
});

function toRecord(headers: HTTPHeaders): Record<string, string | string[]> {
  const record: Record<string, string | string[]> = {};
  if (Symbol.iterator in headers) {
    for (const [name, value] of headers) record[name] = value;
    return record;
  }
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) record[name] = value;
  }
  return record;
}
