import type { Clock } from './Clock.js';
import type { IdempotencyEvent, IdempotencyEventType } from './IdempotencyOptions.js';
import { notifyObserver } from './notifyObserver.js';

/** What an event names: the key and the record's version. */
export interface EventSubject {
  scope: string;
  key: string;
  version: number;
}

/** Reports what happened to a key, with the time since the call started. */
export type Emit = (
  type: IdempotencyEventType,
  subject: EventSubject,
  startedAt: number,
  extra?: Pick<IdempotencyEvent, 'error' | 'unstorable'>,
) => void;

/** The engine's `emit`: builds an event only when someone listens. */
export function eventEmitter(
  onEvent: ((event: IdempotencyEvent) => void) | undefined,
  clock: Clock,
): Emit {
  return (type, subject, startedAt, extra) => {
    if (!onEvent) return;
    const event: IdempotencyEvent = {
      type,
      scope: subject.scope,
      key: subject.key,
      version: subject.version,
      durationMs: clock.monotonicNow() - startedAt,
      mode: 'lease',
    };
    if (extra?.error !== undefined) event.error = extra.error;
    if (extra?.unstorable !== undefined) event.unstorable = extra.unstorable;
    notifyObserver(onEvent, event);
  };
}
