import type { Attributes } from '@opentelemetry/api';
import {
  AggregationTemporality,
  DataPointType,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';

/** One data point of a counter (`value`) or a histogram (`count`, `sum`, `min`, `max`). */
export interface Point {
  attributes: Attributes;
  value?: number;
  count?: number;
  sum?: number | undefined;
  min?: number | undefined;
  max?: number | undefined;
}

export interface OtelHarness {
  meterProvider: MeterProvider;
  tracerProvider: BasicTracerProvider;
  /** Exports what the instrument `name` holds now, through the in-memory exporter. */
  points(name: string): Promise<Point[]>;
  /** The sum of a counter's points whose attributes include `match`. */
  total(name: string, match?: Attributes): Promise<number>;
  /** Every span ended so far. */
  spans(): ReadableSpan[];
  shutdown(): Promise<void>;
}

/**
 * An SDK of its own for one test: a meter provider whose reader exports to an in-memory
 * exporter only when the test asks (the periodic export is an hour away), and a tracer
 * provider that hands every ended span to an in-memory exporter at once.
 */
export function otelHarness(): OtelHarness {
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({
    exporter: metricExporter,
    exportIntervalMillis: 3_600_000,
  });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const spanExporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(spanExporter)],
  });

  async function points(name: string): Promise<Point[]> {
    metricExporter.reset();
    await reader.forceFlush();
    const found: Point[] = [];
    for (const resource of metricExporter.getMetrics()) {
      for (const scope of resource.scopeMetrics) {
        for (const metric of scope.metrics) {
          if (metric.descriptor.name !== name) continue;
          for (const point of metric.dataPoints) {
            if (metric.dataPointType === DataPointType.HISTOGRAM) {
              const value = point.value as {
                count: number;
                sum?: number;
                min?: number;
                max?: number;
              };
              found.push({
                attributes: point.attributes,
                count: value.count,
                sum: value.sum,
                min: value.min,
                max: value.max,
              });
            } else {
              found.push({ attributes: point.attributes, value: point.value as number });
            }
          }
        }
      }
    }
    return found;
  }

  return {
    meterProvider,
    tracerProvider,
    points,
    async total(name, match = {}) {
      return (await points(name))
        .filter((point) =>
          Object.entries(match).every(([key, value]) => point.attributes[key] === value),
        )
        .reduce((sum, point) => sum + (point.value ?? point.count ?? 0), 0);
    },
    spans: () => spanExporter.getFinishedSpans(),
    async shutdown() {
      await Promise.all([meterProvider.shutdown(), tracerProvider.shutdown()]);
    },
  };
}
