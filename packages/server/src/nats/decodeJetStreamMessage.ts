import type { JsMsg } from '@nats-io/jetstream';
import type { OutboxMessage } from '../outbox/OutboxMessage.js';
import { NATS_HEADERS } from './natsHeaders.js';

/** Headers that describe the message, not the event: not handed to the handler. */
const RESERVED = /^(?:nats-|idem-)/i;

/** A JetStream message back as the event `jetStreamPublisher` sent, or why it is not one. */
export function decodeJetStreamMessage(
  message: JsMsg,
): { ok: true; message: OutboxMessage } | { ok: false; error: Error } {
  const id = message.headers?.get(NATS_HEADERS.messageId) ?? '';
  if (id === '') {
    return {
      ok: false,
      error: new Error(
        `JetStream message ${message.seq} on "${message.subject}" has no Nats-Msg-Id header, ` +
          'so it cannot be deduplicated; publish with msgID set to the event id.',
      ),
    };
  }
  let payload: unknown;
  try {
    payload = message.json<unknown>();
  } catch (error) {
    return {
      ok: false,
      error: new Error(`JetStream message ${id} on "${message.subject}" is not JSON.`, {
        cause: error,
      }),
    };
  }
  const header = (name: string) => message.headers?.get(name) ?? '';
  const headers: Record<string, string> = {};
  for (const [name, values] of message.headers ?? []) {
    if (!RESERVED.test(name) && values[0] !== undefined) headers[name] = values[0];
  }
  const createdAt = new Date(header(NATS_HEADERS.createdAt));
  return {
    ok: true,
    message: {
      id,
      topic: header(NATS_HEADERS.topic) || message.subject,
      aggregateKey: header(NATS_HEADERS.aggregateKey) || null,
      payload,
      headers,
      createdAt: Number.isNaN(createdAt.getTime()) ? message.time : createdAt,
    },
  };
}
