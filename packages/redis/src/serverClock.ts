import type { CommandSender } from './RedisConnection.js';

/**
 * How far apart this process's monotonic clock and the Redis server's clock may run, per
 * millisecond elapsed: 1,000 ppm, twice what NTP slews a clock by at most.
 */
const DRIFT_PER_MS = 1e-3;
/** A reading older than this is renewed (in the background: calls do not wait for it). */
const RENEW_AFTER_MS = 5_000;
/** A reading older than this is not used at all: the store falls back to its scripts. */
const USABLE_FOR_MS = 30_000;

/** The Redis server's clock as this process can bound it, epoch milliseconds. */
export interface ServerTime {
  /** A whole millisecond at or after the server's clock's now. */
  readonly now: number;
  /** How far `now` may be ahead of the server's clock: `now - error` is at or before it. */
  readonly error: number;
}

interface Reading {
  /** The server's clock (`TIME`), milliseconds with the microseconds as a fraction. */
  readonly serverMs: number;
  /** This process's `performance.now()` when `TIME` was sent, and when its answer came. */
  readonly sentAt: number;
  readonly answeredAt: number;
}

/**
 * Bounds the Redis server's clock from one `TIME` reading and this process's monotonic
 * clock since: the server read its clock between the send and the answer, so its now lies
 * within `[serverMs + since answer, serverMs + since send]`, widened by the drift allowed
 * since. Readings are renewed every few seconds in the background; until the first one
 * answers (and whenever the last is too old), there is no bound and the store runs scripts,
 * which read the server's clock themselves.
 */
export class ServerClockBound {
  readonly #send: CommandSender;
  #reading: Reading | undefined;
  #renewing = false;

  constructor(send: CommandSender) {
    this.#send = send;
  }

  /** The bound now, or undefined while there is no usable reading. */
  read(): ServerTime | undefined {
    const local = performance.now();
    const reading = this.#reading;
    if (reading === undefined || local - reading.answeredAt > RENEW_AFTER_MS) this.#renew();
    if (reading === undefined || local - reading.answeredAt > USABLE_FOR_MS) return undefined;
    const drift = (local - reading.sentAt) * DRIFT_PER_MS;
    const now = Math.ceil(reading.serverMs + (local - reading.sentAt) + drift);
    const earliest = reading.serverMs + (local - reading.answeredAt) - drift;
    return { now, error: now - earliest };
  }

  #renew(): void {
    if (this.#renewing) return;
    this.#renewing = true;
    const sentAt = performance.now();
    this.#send('clock reading (TIME)', '', ['TIME']).then(
      (reply) => {
        this.#renewing = false;
        const [seconds, micros] = reply as unknown[];
        const serverMs = Number(String(seconds)) * 1000 + Number(String(micros)) / 1000;
        // An answer that is not a time leaves the store on its scripts.
        if (Number.isFinite(serverMs)) {
          this.#reading = { serverMs, sentAt, answeredAt: performance.now() };
        }
      },
      () => {
        // Redis is unreachable: the calls themselves say so; the next call asks again.
        this.#renewing = false;
      },
    );
  }
}
