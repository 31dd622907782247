// `@idem/server/otel`: OpenTelemetry metrics and spans for keys and the outbox, through
// `@opentelemetry/api` only (an optional peer dependency): without an SDK, no-ops.
export {
  type IdempotencyTelemetry,
  type IdempotencyTelemetryOptions,
  idempotencyTelemetry,
} from './idempotencyTelemetry.js';
export {
  type OutboxTelemetry,
  type OutboxTelemetryEvent,
  outboxTelemetry,
} from './outboxTelemetry.js';
export type { TelemetryOptions } from './telemetryProviders.js';
