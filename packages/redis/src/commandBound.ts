/** A pending call: when it is late, whether it settled, and how to fail it. */
interface Pending {
  readonly deadline: number;
  settled: boolean;
  readonly fail: (error: Error) => void;
  /** What was sent, for the error: `claim script`, say, and the record's Redis key. */
  readonly what: string;
  readonly key: string;
}

/** A store call that Redis did not answer within the client's command timeout. */
export class RedisCommandTimeoutError extends Error {
  constructor(what: string, key: string, timeoutMs: number) {
    super(
      `redisStore: Redis did not answer the ${what} on ${key} within ${timeoutMs} ms (the client's command timeout, commandOptions.timeout); the call may still run on the server. Check that Redis is up and reachable, or raise the timeout.`,
    );
    this.name = 'TimeoutError';
  }
}

/**
 * Fails any call that takes longer than `timeoutMs`, as node-redis's per-command timeout
 * does, at a fraction of its cost: node-redis arms an `AbortSignal.timeout` per command (a
 * timer and a weakly held signal each, which the garbage collector must chase: at 16 calls
 * in flight a command's client-side cost several times over), while this keeps its calls
 * in one queue in send order (every call has the same timeout, so deadlines come in order)
 * and one unref'd timer, armed for the oldest unsettled call.
 */
export class CommandBound {
  readonly #timeoutMs: number;
  #queue: Pending[] = [];
  #head = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(timeoutMs: number) {
    this.#timeoutMs = timeoutMs;
  }

  /** `send()`, failed with {@link RedisCommandTimeoutError} if it has not settled in time. */
  run<T>(what: string, key: string, send: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const pending: Pending = {
        deadline: performance.now() + this.#timeoutMs,
        settled: false,
        fail: reject,
        what,
        key,
      };
      this.#queue.push(pending);
      if (this.#timer === undefined) this.#arm(this.#timeoutMs);
      send().then(
        (value) => {
          this.#settle(pending);
          resolve(value);
        },
        (error: unknown) => {
          this.#settle(pending);
          reject(error);
        },
      );
    });
  }

  /** Marks `pending` settled and drops the settled calls at the head of the queue. */
  #settle(pending: Pending): void {
    pending.settled = true;
    const queue = this.#queue;
    let head = this.#head;
    while (head < queue.length && (queue[head] as Pending).settled) head++;
    if (head === queue.length) {
      queue.length = 0;
      head = 0;
    } else if (head >= 1_024) {
      queue.splice(0, head);
      head = 0;
    }
    this.#head = head;
  }

  #arm(delayMs: number): void {
    this.#timer = setTimeout(() => this.#check(), Math.max(1, delayMs));
    this.#timer.unref();
  }

  /** Fails every unsettled call past its deadline, drops settled ones, re-arms for the rest. */
  #check(): void {
    this.#timer = undefined;
    const now = performance.now();
    const queue = this.#queue;
    let head = this.#head;
    for (; head < queue.length; head++) {
      const pending = queue[head] as Pending;
      if (pending.settled) continue;
      if (pending.deadline > now) break;
      pending.settled = true;
      pending.fail(new RedisCommandTimeoutError(pending.what, pending.key, this.#timeoutMs));
    }
    if (head >= queue.length) {
      // Every call settled: the next call arms the timer again.
      queue.length = 0;
      this.#head = 0;
      return;
    }
    this.#head = head;
    this.#arm((queue[head] as Pending).deadline - now);
  }
}
