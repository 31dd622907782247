/** Headers the JetStream publisher sets beside the user's, and the consumer helper reads. */
export const NATS_HEADERS = {
  /** Set by nats.js from the `msgID` option: JetStream deduplicates by it. */
  messageId: 'Nats-Msg-Id',
  topic: 'Idem-Topic',
  aggregateKey: 'Idem-Aggregate-Key',
  createdAt: 'Idem-Created-At',
} as const;
