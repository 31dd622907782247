export {
  type IdempotencyKeyState,
  type IntentKeyState,
  useIdempotencyKey,
} from './useIdempotencyKey.js';
