/**
 * idem's HTTP wire format: `@idem/client` sends and reads exactly these headers, and
 * `@idem/server`'s tRPC middleware reads and writes them. Both take the names from here.
 *
 * Requests:
 *
 * | header | sent on | value |
 * |---|---|---|
 * | `Idempotency-Key` | a single call (no `?batch=1`) | the key: 1–255 printable ASCII characters (0x20–0x7E) |
 * | `Idempotency-Key-Batch` | a batch (`?batch=1`, even a batch of one) | a JSON object from each keyed operation's `batchIndex` (decimal, as a string) to its key, e.g. `{"0":"9b2…","2":"c41…"}`; operations without a key are left out |
 *
 * Responses:
 *
 * | header | when | value |
 * |---|---|---|
 * | `Idempotent-Replayed` | a single call answered from the store | `true` |
 * | `Idempotent-Replayed-Batch` | a batch in which some calls were answered from the store | a JSON array of their batch indices, e.g. `[0,2]` |
 * | `Idempotency-Status` | a single call refused with 409 because the key is busy | `in-progress` (another request holds the key) or `lease-lost` (this attempt was taken over) |
 * | `Idempotency-Status-Batch` | the same, in a batch | a JSON object from batch index to status, e.g. `{"1":"in-progress"}` |
 * | `Retry-After` | with `Idempotency-Status` (in a batch: the longest of its calls) | whole seconds, rounded up |
 *
 * Response headers need a response that is sent after the calls finish: `httpLink` and
 * `httpBatchLink`. A streamed batch (`httpBatchStreamLink`) sends its headers first, so it
 * carries none of these; errors still say what happened in `data.idempotency`.
 */
export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';
/** See {@link IDEMPOTENCY_KEY_HEADER} for the whole wire format. */
export const IDEMPOTENCY_KEY_BATCH_HEADER = 'Idempotency-Key-Batch';
/** See {@link IDEMPOTENCY_KEY_HEADER} for the whole wire format. */
export const IDEMPOTENT_REPLAYED_HEADER = 'Idempotent-Replayed';
/** See {@link IDEMPOTENCY_KEY_HEADER} for the whole wire format. */
export const IDEMPOTENT_REPLAYED_BATCH_HEADER = 'Idempotent-Replayed-Batch';
/** See {@link IDEMPOTENCY_KEY_HEADER} for the whole wire format. */
export const IDEMPOTENCY_STATUS_HEADER = 'Idempotency-Status';
/** See {@link IDEMPOTENCY_KEY_HEADER} for the whole wire format. */
export const IDEMPOTENCY_STATUS_BATCH_HEADER = 'Idempotency-Status-Batch';
/** See {@link IDEMPOTENCY_KEY_HEADER} for the whole wire format. */
export const RETRY_AFTER_HEADER = 'Retry-After';

/** Why a call was refused with a 409 that a retry with the same key may cure. */
export type IdempotencyStatus = 'in-progress' | 'lease-lost';
