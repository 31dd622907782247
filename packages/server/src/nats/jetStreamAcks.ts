import { type ApiError, JetStreamApiError } from '@nats-io/jetstream';
import {
  createInbox,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  NoRespondersError,
  RequestError,
  type Subscription,
  TimeoutError,
} from '@nats-io/nats-core';
import type { PublishResult } from '../outbox/OutboxMessage.js';

/** One message to store in a stream: the subject a stream captures, its body and headers. */
export interface JetStreamMessage {
  subject: string;
  payload: string;
  headers: MsgHdrs;
}

export interface JetStreamAcks {
  /**
   * Publishes every message at once, each with its own reply subject, and resolves with
   * one result per message once the stream acknowledged all of them or `timeoutMs` passed.
   */
  publishAll(messages: readonly JetStreamMessage[], timeoutMs: number): Promise<PublishResult[]>;
  /** Stops listening for acknowledgements (the connection stays open). */
  close(): void;
}

/**
 * Publishes to JetStream with the acknowledgements of a whole batch collected by ONE
 * subscription on a reply inbox and bounded by ONE timer. `js.publish` per message makes a
 * request each: its own timer, and two `Error`s built up front for the stack trace of a
 * timeout that almost never comes. That was a third of a relay's CPU through NATS. Results
 * and errors are the ones `js.publish` gives: a timeout or no responders (no stream
 * captures the subject) are transient, a JetStream refusal is a `JetStreamApiError`.
 */
export function jetStreamAcks(nc: NatsConnection): JetStreamAcks {
  const prefix = createInbox();
  /** Per reply token: the subject published on, and how to settle its message. */
  const waiting = new Map<string, { subject: string; settle: (result: PublishResult) => void }>();
  let next = 0;
  let subscription: Subscription | undefined;

  const onAck = (error: Error | null, msg: Msg) => {
    if (error) return; // the subscription closes with the connection; timers settle the rest
    const entry = waiting.get(msg.subject.slice(prefix.length + 1));
    // Absent: an acknowledgement that came after its batch timed out.
    entry?.settle(ackResult(msg, entry.subject));
  };

  return {
    publishAll(messages, timeoutMs) {
      subscription ??= nc.subscribe(`${prefix}.*`, { callback: onAck });
      return new Promise((resolve) => {
        const results: PublishResult[] = new Array(messages.length);
        const tokens: string[] = [];
        let pending = messages.length;
        const finish = () => {
          clearTimeout(timer);
          for (const token of tokens) waiting.delete(token);
          resolve(results);
        };
        const timer = setTimeout(() => {
          const timeout = new TimeoutError();
          for (let index = 0; index < results.length; index++) {
            results[index] ??= { ok: false, error: timeout };
          }
          finish();
        }, timeoutMs);
        messages.forEach((message, index) => {
          const token = (next++).toString(36);
          tokens.push(token);
          waiting.set(token, {
            subject: message.subject,
            settle: (result) => {
              if (results[index] !== undefined) return;
              results[index] = result;
              if (--pending === 0) finish();
            },
          });
          try {
            nc.publish(message.subject, message.payload, {
              reply: `${prefix}.${token}`,
              headers: message.headers,
            });
          } catch (error) {
            // A closed connection or a bad subject: this message fails, now.
            waiting.get(token)?.settle({ ok: false, error });
          }
        });
        if (messages.length === 0) finish();
      });
    },

    close() {
      subscription?.unsubscribe();
      subscription = undefined;
    },
  };
}

function ackResult(msg: Msg, subject: string): PublishResult {
  if (msg.headers?.code === 503) {
    // Core NATS's answer when nothing subscribes to the subject: no stream captures it.
    return {
      ok: false,
      error: new RequestError('no responders', { cause: new NoRespondersError(subject) }),
    };
  }
  let ack: { stream?: string; error?: ApiError };
  try {
    ack = msg.json();
  } catch (error) {
    return { ok: false, error };
  }
  if (ack.error) return { ok: false, error: new JetStreamApiError(ack.error) };
  if (!ack.stream) return { ok: false, error: new Error('JetStream: invalid ack response') };
  return { ok: true };
}
