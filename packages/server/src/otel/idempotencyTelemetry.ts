import type { IdempotencyEvent, IdempotencyEventType } from '@idem/core';
import { notifyObserver } from '@idem/core/store';
import { type Attributes, type Counter, SpanKind } from '@opentelemetry/api';
import {
  endedSpan,
  errorTypeOf,
  lazyInstruments,
  type TelemetryOptions,
} from './telemetryProviders.js';

export interface IdempotencyTelemetryOptions extends TelemetryOptions {
  /**
   * The procedure a scope belongs to, for the `rpc.method` attribute. `idempotent()` stores
   * keys under `principal/procedure.path`, with any `/` of the principal percent-encoded,
   * so the procedure is what follows the last `/`. With `createIdempotency` and scopes of
   * another shape, return the operation's name here, never anything naming the caller: it
   * becomes a metric attribute.
   * @default the part of the scope after its last `/` (none if it has no `/`)
   */
  procedureOf?: (scope: string) => string | undefined;
}

export interface IdempotencyTelemetry {
  /** Records one event: pass it as `onEvent` to `idempotent()` or `createIdempotency()`. */
  readonly onEvent: (event: IdempotencyEvent) => void;
}

/** How a call ended, by the event that ends it (`claimed` and `takeover` start one). */
const OUTCOME_OF: Partial<Record<IdempotencyEventType, string>> = {
  completed: 'executed',
  released: 'released',
  lease_lost: 'lease_lost',
  replayed: 'replayed',
  in_progress: 'in_progress',
  mismatch: 'mismatch',
};

/** One counter per event type: name, unit, description. A type added later is not counted. */
const COUNTERS: Partial<Record<IdempotencyEventType, [string, string, string]>> = {
  claimed: ['idem.key.claims', '{claim}', 'Keys claimed for a first run.'],
  takeover: [
    'idem.key.takeovers',
    '{takeover}',
    'Keys claimed again after the previous holder lost its lease (crash, released failure).',
  ],
  replayed: ['idem.key.replays', '{replay}', 'Calls answered with a stored outcome.'],
  in_progress: [
    'idem.key.in_progress',
    '{answer}',
    'Calls answered "in progress" (409) because their key was still running.',
  ],
  mismatch: [
    'idem.key.mismatches',
    '{mismatch}',
    'Calls refused (422) because their key was used with another input.',
  ],
  completed: ['idem.key.completions', '{completion}', 'Outcomes stored (successes and errors).'],
  released: [
    'idem.key.releases',
    '{release}',
    'Keys released after a transient failure, so that a retry runs again.',
  ],
  lease_lost: [
    'idem.key.lease_losses',
    '{loss}',
    'Attempts that found their lease taken over and wrote nothing.',
  ],
};

const defaultProcedureOf = (scope: string) => {
  const slash = scope.lastIndexOf('/');
  return slash < 0 || slash === scope.length - 1 ? undefined : scope.slice(slash + 1);
};

/**
 * OpenTelemetry metrics and spans for idempotency keys, through `@opentelemetry/api` only:
 * without an SDK every call is a no-op.
 *
 * ```ts
 * idempotent({ db, scope, onEvent: idempotencyTelemetry().onEvent })
 * ```
 *
 * Metric attributes are the procedure (`rpc.method`), the mode (`idem.mode`), the outcome
 * (`idem.outcome`, on the duration) and `error.type`; never the key or the principal,
 * which would make one series per user (cardinality) and put user ids in dashboards.
 * Spans carry the key as `idem.key`, never the scope.
 */
export function idempotencyTelemetry(
  options: IdempotencyTelemetryOptions = {},
): IdempotencyTelemetry {
  const procedureOf = options.procedureOf ?? defaultProcedureOf;
  const instruments = lazyInstruments(options, ({ counter, durations, tracer }) => {
    const counters: Partial<Record<string, Counter>> = {};
    for (const [type, [name, unit, description]] of Object.entries(COUNTERS)) {
      counters[type] = counter(name, unit, description);
    }
    const duration = durations(
      'idem.key.duration',
      'Time from the start of an idempotent call to its outcome (executed, replayed, in_progress, mismatch, released, lease_lost).',
    );
    return { counters, duration, tracer };
  });

  // Telemetry must never change the outcome of a write, whoever calls this.
  const onEvent = (event: IdempotencyEvent) => notifyObserver(record, event);

  function record(event: IdempotencyEvent) {
    const { counters, duration, tracer } = instruments();
    const procedure = procedureOf(event.scope);
    const attributes: Attributes = { 'rpc.system': 'trpc', 'rpc.system.name': 'trpc' };
    if (procedure !== undefined) attributes['rpc.method'] = procedure;
    if (event.mode !== undefined) attributes['idem.mode'] = event.mode;
    if (event.error !== undefined) attributes['error.type'] = errorTypeOf(event.error);
    counters[event.type]?.add(1, attributes);

    const outcome = OUTCOME_OF[event.type];
    if (outcome === undefined) return;
    const ended = { ...attributes, 'idem.outcome': outcome };
    duration.recordMs(event.durationMs, ended);

    const failed = event.error !== undefined || event.type === 'lease_lost';
    endedSpan(tracer, {
      name: procedure === undefined ? 'idempotent' : `idempotent ${procedure}`,
      kind: SpanKind.INTERNAL,
      durationMs: event.durationMs,
      attributes: {
        ...ended,
        'idem.key': event.key,
        ...(event.version !== undefined && { 'idem.version': event.version }),
      },
      ...(failed && { error: event.error }),
    });
  }

  return { onEvent };
}
