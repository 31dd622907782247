import { type ChildProcess, fork } from 'node:child_process';
import { onCleanup } from './cleanup.js';

/** A message between the run and a child: `id` pairs a request with its reply. */
export interface ChildMessage {
  type: string;
  id?: number | undefined;
  [field: string]: unknown;
}

export interface Child {
  readonly pid: number;
  readonly process: ChildProcess;
  /** The child's `ready` message (its port, for a server). */
  readonly ready: ChildMessage;
  /** Sends `{ type, ...payload }` and resolves with the child's reply to it. */
  request<T extends object = ChildMessage>(
    type: string,
    payload?: Record<string, unknown>,
  ): Promise<T & ChildMessage>;
  /** Resolves with the exit code (or signal) once the process has ended. */
  readonly exited: Promise<number | NodeJS.Signals>;
  /** Asks the child to stop (`stop` message), then SIGKILLs it after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
  kill(signal?: NodeJS.Signals): void;
  /** The last few KiB the child wrote to stderr (still forwarded to ours). */
  stderrTail(): string;
}

export interface StartChildOptions {
  env?: Record<string, string>;
  /** Extra Node flags, e.g. `--expose-gc`, `--cpu-prof`. */
  nodeFlags?: string[];
  /** How long the child may take to send `ready`. */
  readyTimeoutMs?: number;
  /** Where the child's stdout/stderr go; `tail`: like `inherit`, and stderr is also kept for `stderrTail()`. @default 'inherit' */
  stdio?: 'inherit' | 'ignore' | 'tail';
}

/**
 * Forks a TypeScript module as a separate Node process (same loader flags as this one, so
 * tsx and the `@idem/source` condition carry over) and waits for its `ready` message. The
 * child is SIGKILLed by the cleanups if the run ends first.
 */
export async function startChild(
  modulePath: string,
  options: StartChildOptions = {},
): Promise<Child> {
  const child = fork(modulePath, [], {
    execArgv: [...process.execArgv, ...(options.nodeFlags ?? [])],
    env: { ...process.env, ...options.env },
    stdio:
      options.stdio === 'ignore'
        ? ['ignore', 'ignore', 'ignore', 'ipc']
        : options.stdio === 'tail'
          ? ['ignore', 'inherit', 'pipe', 'ipc']
          : 'inherit',
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    process.stderr.write(chunk);
    stderr = (stderr + chunk.toString('utf8')).slice(-4_096);
  });
  const pid = child.pid ?? -1;
  const exited = new Promise<number | NodeJS.Signals>((resolve) => {
    child.once('exit', (code, signal) => resolve(signal ?? code ?? 0));
  });
  const forget = onCleanup(`kill child ${pid}`, async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  void exited.then(() => forget());

  let nextId = 1;
  const pending = new Map<
    number,
    { resolve: (message: ChildMessage) => void; reject: (error: Error) => void }
  >();
  child.on('message', (raw) => {
    const message = raw as ChildMessage;
    if (message.id !== undefined) {
      pending.get(message.id)?.resolve(message);
      pending.delete(message.id);
    }
  });
  void exited.then((status) => {
    for (const { reject } of pending.values()) reject(new Error(`child ${pid} exited (${status})`));
    pending.clear();
  });

  const ready = await new Promise<ChildMessage>((resolve, reject) => {
    const timeout = setTimeout(
      () =>
        reject(
          new Error(
            `child ${modulePath} sent no "ready" within ${options.readyTimeoutMs ?? 120_000} ms`,
          ),
        ),
      options.readyTimeoutMs ?? 120_000,
    );
    const onMessage = (raw: unknown) => {
      const message = raw as ChildMessage;
      if (message.type === 'ready') {
        clearTimeout(timeout);
        child.off('message', onMessage);
        resolve(message);
      } else if (message.type === 'failed') {
        clearTimeout(timeout);
        reject(new Error(`child ${modulePath} failed to start: ${String(message.error)}`));
      }
    };
    child.on('message', onMessage);
    void exited.then((status) => {
      clearTimeout(timeout);
      reject(new Error(`child ${modulePath} exited (${status}) before it was ready`));
    });
  });

  return {
    pid,
    process: child,
    ready,
    exited,
    request<T extends object = ChildMessage>(type: string, payload: Record<string, unknown> = {}) {
      const id = nextId++;
      return new Promise<T & ChildMessage>((resolve, reject) => {
        pending.set(id, { resolve: resolve as (message: ChildMessage) => void, reject });
        child.send({ ...payload, type, id });
      });
    },
    async stop(graceMs = 5_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      if (child.connected) child.send({ type: 'stop' });
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
    stderrTail: () => stderr,
    kill(signal = 'SIGKILL') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
  };
}

/**
 * The child's half: `ready` with `fields`, replies to requests through `handlers`, and
 * `stop` runs `onStop` then exits. Also exits when the parent goes away.
 */
export function serveParent(handlers: {
  onStop: () => Promise<void>;
  requests?: Record<
    string,
    (message: ChildMessage) => Promise<Record<string, unknown>> | Record<string, unknown>
  >;
}): { ready(fields: Record<string, unknown>): void; failed(error: unknown): void } {
  const send = (message: ChildMessage) => process.send?.(message);
  process.on('message', (raw) => {
    const message = raw as ChildMessage;
    if (message.type === 'stop') {
      void handlers.onStop().finally(() => process.exit(0));
      return;
    }
    const handler = handlers.requests?.[message.type];
    if (!handler) return;
    void Promise.resolve()
      .then(() => handler(message))
      .then(
        (reply) => send({ ...reply, type: `${message.type}:reply`, id: message.id }),
        (error: unknown) =>
          send({ type: `${message.type}:error`, id: message.id, error: String(error) }),
      );
  });
  process.on('disconnect', () => process.exit(0));
  return {
    ready: (fields) => send({ ...fields, type: 'ready' }),
    failed: (error) => {
      send({
        type: 'failed',
        error: error instanceof Error ? (error.stack ?? error.message) : String(error),
      });
      setTimeout(() => process.exit(1), 100);
    },
  };
}
