import { notifyObserver, requirePositive } from '@idem/core/store';
import type { $ZodType, input, output } from 'zod/v4/core';
import { missingTablesError } from '../postgres/missingTablesError.js';
import type { PgDatabaseLike } from '../postgres/PgDatabaseLike.js';
import { InvalidEventError } from './errors/InvalidEventError.js';
import { checkPayload, type RawEvent, type ValidEvent, validateEvent } from './validateEvent.js';
import { writeEvents } from './writeEvents.js';

/** Topic name → zod schema of its payload. */
export type EventSchemas = Record<string, $ZodType>;

/** A topic of a set of event definitions. */
export type TopicOf<TSchemas extends EventSchemas> = keyof TSchemas & string;

/** One event to enqueue: a known topic with a payload its schema accepts. */
export type EventInput<TSchemas extends EventSchemas> = {
  [TTopic in TopicOf<TSchemas>]: {
    topic: TTopic;
    payload: input<TSchemas[TTopic]>;
    /**
     * The entity the event is about (an order id, say). Relays with `ordered: true` publish
     * the events of one aggregate key in the order their transactions committed.
     * @default none: the event is not ordered with any other
     */
    aggregateKey?: string;
    /**
     * Extra metadata, carried as broker message headers (trace ids, tenant, …).
     * @default {}
     */
    headers?: Record<string, string>;
  };
}[TopicOf<TSchemas>];

export interface DefineEventsOptions {
  /**
   * The largest payload accepted, in bytes of JSON. Brokers cap message sizes (NATS:
   * 1 MiB by default), and a large payload in a hot table slows every relay.
   * @default 262_144 (256 KiB)
   */
  maxPayloadBytes?: number;
  /**
   * Takes a transaction-scoped advisory lock per aggregate key, so that producers of one
   * aggregate commit one after another, in `seq` order. `ordered` relays depend on it: an
   * event of a transaction that commits late can then never overtake or be overtaken.
   * Turn it off only if your transactions already serialise per aggregate before they
   * enqueue (e.g. `SELECT … FOR UPDATE` on the aggregate's row), or no relay is `ordered`.
   * @default true
   */
  lockAggregates?: boolean;
  /**
   * Sends `NOTIFY idem_outbox` with the insert, so listening relays wake at commit instead
   * of at their next poll. A hint only: relays poll anyway.
   * @default true
   */
  notify?: boolean;
  /**
   * Called once per event written, for logs and metrics. The write is in the caller's
   * transaction: a rollback undoes it, not the report. Exceptions are swallowed.
   * @default no reporting
   */
  onEvent?: (event: EnqueueEvent) => void;
}

/** An event `enqueue` wrote into the outbox, in the caller's transaction. */
export interface EnqueueEvent {
  type: 'enqueued';
  id: string;
  topic: string;
}

export interface EventDefinitions<TSchemas extends EventSchemas> {
  /** The schemas, by topic. */
  readonly schemas: TSchemas;
  /**
   * Writes the event(s) in `tx`, the caller's transaction, and returns the new event id(s).
   * Every event is validated first, and an `InvalidEventError` (unknown topic, payload
   * failing its schema, payload over `maxPayloadBytes`, bad headers) is thrown before
   * anything is written. Standalone: `const { enqueue } = defineEvents({ … })`.
   * A database without idem's tables is a `ConfigurationError` naming `migrate(db)`.
   */
  enqueue: {
    (tx: PgDatabaseLike, event: EventInput<TSchemas>): Promise<string>;
    (tx: PgDatabaseLike, events: readonly EventInput<TSchemas>[]): Promise<string[]>;
  };
  /**
   * Checks a delivered payload against its topic's schema and returns the schema's output,
   * for consumers that receive events from a broker.
   * @throws InvalidEventError for an unknown topic or a payload that does not match.
   */
  parse<TTopic extends TopicOf<TSchemas>>(
    topic: TTopic,
    payload: unknown,
  ): Promise<output<TSchemas[TTopic]>>;
}

/**
 * Declares the events an app publishes: a map from topic to the zod schema of its payload.
 * The result's `enqueue` is typed by that map and writes events into the outbox in the
 * caller's transaction.
 *
 * @example
 * const { enqueue } = defineEvents({
 *   'order.placed': z.object({ orderId: z.string(), totalCents: z.number().int() }),
 * });
 * await db.transaction(async (tx) => {
 *   await tx.insert(orders).values(order);
 *   await enqueue(tx, { topic: 'order.placed', aggregateKey: order.id, payload: { orderId: order.id, totalCents: 1299 } });
 * });
 */
export function defineEvents<const TSchemas extends EventSchemas>(
  schemas: TSchemas,
  options: DefineEventsOptions = {},
): EventDefinitions<TSchemas> {
  const maxPayloadBytes = requirePositive(
    'defineEvents: maxPayloadBytes',
    options.maxPayloadBytes ?? 262_144,
    { integer: true, unit: 'bytes' },
  );
  const writeOptions = {
    lockAggregates: options.lockAggregates ?? true,
    notify: options.notify ?? true,
  };
  const { onEvent } = options;

  async function enqueue(tx: PgDatabaseLike, event: EventInput<TSchemas>): Promise<string>;
  async function enqueue(
    tx: PgDatabaseLike,
    events: readonly EventInput<TSchemas>[],
  ): Promise<string[]>;
  async function enqueue(
    tx: PgDatabaseLike,
    input: EventInput<TSchemas> | readonly EventInput<TSchemas>[],
  ): Promise<string | string[]> {
    const list = (Array.isArray(input) ? input : [input]) as readonly RawEvent[];
    const valid: ValidEvent[] = [];
    // All of them before any write: one bad event leaves the transaction untouched.
    for (const [index, event] of list.entries()) {
      valid.push(await validateEvent(schemas, event, index, maxPayloadBytes));
    }
    let ids: string[];
    try {
      ids = await writeEvents(tx, valid, writeOptions);
    } catch (error) {
      throw missingTablesError(error, 'enqueue() wrote nothing', true) ?? error;
    }
    if (onEvent) report(onEvent, ids, valid);
    return Array.isArray(input) ? ids : (ids[0] as string);
  }

  return {
    schemas,
    enqueue,
    async parse<TTopic extends TopicOf<TSchemas>>(topic: TTopic, payload: unknown) {
      const schema = Object.hasOwn(schemas, topic) ? schemas[topic] : undefined;
      if (!schema) {
        throw new InvalidEventError(
          { reason: 'unknown_topic', topic: String(topic), index: 0 },
          `Event "${String(topic)}": unknown topic; it is not in these event definitions.`,
        );
      }
      return (await checkPayload(schema, topic, 0, payload)) as output<TSchemas[TTopic]>;
    },
  };
}

function report(
  onEvent: (event: EnqueueEvent) => void,
  ids: readonly string[],
  events: readonly ValidEvent[],
) {
  // Observability must never fail the producer's transaction.
  events.forEach((event, index) => {
    notifyObserver(onEvent, { type: 'enqueued', id: ids[index] as string, topic: event.topic });
  });
}
