import {
  type Attributes,
  type Counter,
  type Meter,
  type MeterProvider,
  metrics,
  type SpanKind,
  SpanStatusCode,
  type Tracer,
  type TracerProvider,
  trace,
} from '@opentelemetry/api';

/** Where the instruments and spans go. */
export interface TelemetryOptions {
  /**
   * The meter provider to record metrics with.
   * @default the global one (`metrics.getMeterProvider()`), looked up at the first event,
   * so an SDK registered after this call but before the first request is used
   */
  meterProvider?: MeterProvider;
  /**
   * The tracer provider to record spans with.
   * @default the global one (`trace.getTracerProvider()`), looked up at the first event
   */
  tracerProvider?: TracerProvider;
}

/** The instrumentation scope every idem meter and tracer is named after. */
export const INSTRUMENTATION_SCOPE = '@idem/server';

/**
 * Durations in seconds (OpenTelemetry's unit for time): the semantic conventions' buckets
 * for request durations, then minutes, for lags that grow while a broker is down.
 */
const SECONDS_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 300, 900,
];

/** A histogram of times, kept in seconds over {@link SECONDS_BUCKETS}, given milliseconds. */
export interface Durations {
  recordMs(ms: number, attributes: Attributes): void;
}

/** What `lazyInstruments` hands `create`: the tracer, and makers of idem's instruments. */
export interface InstrumentMaker {
  readonly tracer: Tracer;
  /** A counter; `unit` is a UCUM annotation such as `{event}`. */
  counter(name: string, unit: string, description: string): Counter;
  durations(name: string, description: string): Durations;
}

function instrumentMaker(meter: Meter, tracer: Tracer): InstrumentMaker {
  return {
    tracer,
    counter: (name, unit, description) => meter.createCounter(name, { unit, description }),
    durations(name, description) {
      const histogram = meter.createHistogram(name, {
        unit: 's',
        description,
        advice: { explicitBucketBoundaries: SECONDS_BUCKETS },
      });
      return { recordMs: (ms, attributes) => histogram.record(seconds(ms), attributes) };
    },
  };
}

/**
 * Builds `create(instruments)` once, at the first call: the global providers of
 * `@opentelemetry/api` hand out no-op meters until an SDK registers (a meter got earlier
 * stays a no-op), so looking them up when the first event arrives instead of at
 * construction lets an app create the telemetry before it starts its SDK.
 */
export function lazyInstruments<T>(
  options: TelemetryOptions,
  create: (make: InstrumentMaker) => T,
): () => T {
  let instruments: T | undefined;
  return () => {
    instruments ??= create(
      instrumentMaker(
        (options.meterProvider ?? metrics.getMeterProvider()).getMeter(INSTRUMENTATION_SCOPE),
        (options.tracerProvider ?? trace.getTracerProvider()).getTracer(INSTRUMENTATION_SCOPE),
      ),
    );
    return instruments;
  };
}

/**
 * `error.type` of the semantic conventions: a low-cardinality class of the error. A string
 * `code` (tRPC's `CONFLICT`, idem's `LEASE_LOST`, a SQLSTATE, `ECONNRESET`) says most,
 * then the error's name; never its message, which may carry user data.
 */
export function errorTypeOf(error: unknown): string {
  if (typeof error === 'object' && error !== null) {
    const { code, name } = error as { code?: unknown; name?: unknown };
    if (typeof code === 'string' && code.length > 0 && code.length <= 64) return code;
    if (typeof name === 'string' && name.length > 0 && name.length <= 64) return name;
  }
  return '_OTHER';
}

/** Milliseconds as the seconds OpenTelemetry records durations in. */
const seconds = (ms: number) => Math.max(0, ms) / 1_000;

/**
 * Records a span for something that already ended `durationMs` ago: the hooks report an
 * operation when it settles, with its duration. `error` (present, even if `undefined`)
 * marks the span failed, with `error.type` as the status message.
 */
export function endedSpan(
  tracer: Tracer,
  span: {
    name: string;
    kind: SpanKind;
    durationMs: number;
    attributes: Attributes;
    error?: unknown;
  },
): void {
  const endTime = Date.now();
  const started = tracer.startSpan(span.name, {
    kind: span.kind,
    startTime: new Date(endTime - Math.max(0, span.durationMs)),
    attributes: span.attributes,
  });
  if ('error' in span) {
    if (span.error instanceof Error) started.recordException(span.error);
    started.setStatus({
      code: SpanStatusCode.ERROR,
      message: String(span.attributes['error.type'] ?? errorTypeOf(span.error)),
    });
  }
  started.end(new Date(endTime));
}
