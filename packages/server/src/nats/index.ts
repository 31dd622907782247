// `@idem/server/nats`: the NATS JetStream adapter, apart from the main entry so that apps
// without NATS never load the @nats-io packages.
export type {
  ConsumeJetStreamOptions,
  DeliveredEvent,
  JetStreamConsumerEvent,
  JetStreamConsumption,
} from './ConsumeJetStreamOptions.js';
export { consumeJetStream } from './consumeJetStream.js';
export { isTransientNatsError } from './isTransientNatsError.js';
export {
  type JetStreamPublisher,
  type JetStreamPublisherOptions,
  jetStreamPublisher,
} from './jetStreamPublisher.js';
export { NATS_HEADERS } from './natsHeaders.js';
