export { type IdempotencyKeyState, useIdempotencyKey } from './useIdempotencyKey.js';
