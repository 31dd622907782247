// `@idem/server/outbox`: the transactional outbox and the inbox, apart from the main entry so
// that an app without a tRPC router need not install tRPC (test/entries.test.ts checks the
// import graph). The NATS adapter is `@idem/server/nats`.
export {
  type DefineEventsOptions,
  defineEvents,
  type EnqueueEvent,
  type EventDefinitions,
  type EventInput,
  type EventSchemas,
  type TopicOf,
} from './defineEvents.js';
export {
  type EventIssue,
  InvalidEventError,
  type InvalidEventReason,
  isInvalidEventError,
} from './errors/InvalidEventError.js';
export {
  createInboxSweeper,
  type InboxSweeperOptions,
} from './inbox/createInboxSweeper.js';
export {
  type BatchHandler,
  type BatchItemResult,
  type ConsumerEvent,
  type HandleResult,
  type IdempotentConsumer,
  type IdempotentConsumerOptions,
  idempotentConsumer,
} from './inbox/idempotentConsumer.js';
export type { OutboxMessage, Publisher, PublishResult } from './OutboxMessage.js';
export {
  type InProcessBatchHandler,
  type InProcessBatchResult,
  type InProcessHandlers,
  type InProcessPublisherOptions,
  inProcessPublisher,
} from './publishers/inProcessPublisher.js';
export { createRelay } from './relay/createRelay.js';
export type { DeadLetter, ListDeadLettersOptions } from './relay/deadLetters.js';
export type { Relay, RelayRound, RelayStats } from './relay/Relay.js';
export type { RelayEvent, RelayEventType } from './relay/RelayEvent.js';
export type { RelayBackoffOptions, RelayOptions } from './relay/RelayOptions.js';
export {
  type InboxEventRow,
  inboxEvents,
  type OutboxEventRow,
  outboxEvents,
} from './schema.js';
