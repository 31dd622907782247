import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

export interface StartRedisOptions {
  /**
   * The `redis-server` (or `valkey-server`) executable.
   * @default process.env.REDIS_SERVER, else 'redis-server' from the PATH
   */
  binary?: string;
  /**
   * How long a server may take to answer, and a cluster to reach `cluster_state:ok`, before
   * start fails (a busy machine is slow at this).
   * @default 30_000
   */
  readyTimeoutMs?: number;
}

export interface StartRedisClusterOptions extends StartRedisOptions {
  /**
   * How many masters (no replicas); Redis Cluster needs at least 3.
   * @default 3
   */
  masters?: number;
  /**
   * The `redis-cli` (or `valkey-cli`) executable that creates the cluster.
   * @default process.env.REDIS_CLI, else 'redis-cli' from the PATH
   */
  cli?: string;
}

/** One `redis-server` process started by {@link startRedisServer} or {@link startRedisCluster}. */
export interface RedisServer {
  /** `redis://127.0.0.1:<port>`. */
  readonly url: string;
  readonly port: number;
  /** SIGKILLs the process and deletes its folder (no persistence, nothing to keep). */
  stop(): Promise<void>;
}

export interface RedisCluster {
  /** One per master, in slot order as created (the first holds slot 0). */
  readonly nodes: readonly RedisServer[];
  /** `{ url }` of every node: node-redis's `createCluster({ rootNodes })`. */
  readonly rootNodes: { url: string }[];
  /** Stops every node. */
  stop(): Promise<void>;
}

/** The flags of a throwaway server: loopback only, no RDB snapshots, no AOF. */
const EPHEMERAL = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];

/**
 * Starts a throwaway `redis-server` on a free loopback port (never the machine's own at
 * 6379), with no persistence, in a temporary folder; resolves once that process (not just
 * any server) answers on the port. For tests, examples and benchmarks; the process never
 * outlives the one that started it.
 */
export async function startRedisServer(options: StartRedisOptions = {}): Promise<RedisServer> {
  return startProcess(options, async () => []);
}

/**
 * Starts a Redis Cluster of `masters` throwaway `redis-server` processes on free loopback
 * ports (no replicas), joins them with `redis-cli --cluster create`, and resolves once every
 * node reports `cluster_state:ok` with all 16384 slots assigned.
 */
export async function startRedisCluster(
  options: StartRedisClusterOptions = {},
): Promise<RedisCluster> {
  const masters = options.masters ?? 3;
  if (!(Number.isInteger(masters) && masters >= 3)) {
    throw new TypeError(`startRedisCluster: masters must be an integer ≥ 3; got ${masters}.`);
  }
  const readyTimeoutMs = options.readyTimeoutMs ?? 30_000;
  const nodes: RedisServer[] = [];
  const cluster: RedisCluster = {
    nodes,
    get rootNodes() {
      return nodes.map((node) => ({ url: node.url }));
    },
    stop: async () => {
      await Promise.all(nodes.map((node) => node.stop()));
    },
  };
  try {
    for (let index = 0; index < masters; index++) {
      nodes.push(
        // The cluster bus gets a free port of its own: the default (port + 10000) can be
        // taken, or past 65535 for a port from the upper ephemeral range.
        await startProcess(options, async () => [
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          'nodes.conf',
          '--cluster-node-timeout',
          '5000',
          '--cluster-port',
          String(await freePort()),
        ]),
      );
    }
    await promisify(execFile)(
      options.cli ?? process.env.REDIS_CLI ?? 'redis-cli',
      [
        '--cluster',
        'create',
        ...nodes.map((node) => `127.0.0.1:${node.port}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ],
      { timeout: readyTimeoutMs },
    );
    for (const node of nodes) {
      await until(readyTimeoutMs, `node ${node.port} to report cluster_state:ok`, async () => {
        const info = await command(node.port, ['CLUSTER', 'INFO']).catch(() => '');
        return info.includes('cluster_state:ok') && info.includes('cluster_slots_assigned:16384');
      });
    }
  } catch (error) {
    await cluster.stop();
    throw error;
  }
  return cluster;
}

async function startProcess(
  options: StartRedisOptions,
  extraArgs: () => Promise<string[]>,
): Promise<RedisServer> {
  const binary = options.binary ?? process.env.REDIS_SERVER ?? 'redis-server';
  const readyTimeoutMs = options.readyTimeoutMs ?? 30_000;
  // A free port can be taken between picking it and binding it: a server that exits while
  // starting is tried again on other ports.
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const extra = await extraArgs();
    const dir = await mkdtemp(join(tmpdir(), 'idem-redis-'));
    const child = spawn(binary, ['--port', String(port), '--dir', dir, ...EPHEMERAL, ...extra], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-2_000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    const exited = exitOf(child);
    const killOnExit = () => child.kill('SIGKILL');
    process.once('exit', killOnExit);
    const stop = async () => {
      process.removeListener('exit', killOnExit);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited.promise;
      await rm(dir, { recursive: true, force: true });
    };
    try {
      await until(readyTimeoutMs, `redis-server on port ${port} to answer`, async () => {
        if (exited.done) throw new Error(`redis-server (${binary}) exited: ${output.trim()}`);
        return answersAs(port, child.pid);
      });
      return { url: `redis://127.0.0.1:${port}`, port, stop };
    } catch (error) {
      await stop();
      if (attempt < 5 && exited.done) continue;
      throw error;
    }
  }
}

/**
 * Whether the server on `port` is the process `pid`: `INFO server` names its process. A
 * PING alone would also be answered by another server that took the port first (another
 * test's, between picking the port and binding it), and the tests would then share it.
 */
export async function answersAs(port: number, pid: number | undefined): Promise<boolean> {
  if (pid === undefined) return false;
  const info = await command(port, ['INFO', 'server']).catch(() => '');
  return info.includes(`\nprocess_id:${pid}\r\n`);
}

function exitOf(child: ChildProcess) {
  const state = { done: false, promise: Promise.resolve() };
  state.promise = new Promise<void>((resolve) => {
    const finish = () => {
      state.done = true;
      resolve();
    };
    child.once('exit', finish);
    child.once('error', finish);
  });
  return state;
}

/**
 * Sends one command and returns its simple or bulk string reply: just enough RESP to wait
 * for a server (PING, CLUSTER INFO) without a client library.
 */
function command(port: number, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.setTimeout(2_000, () => socket.destroy(new Error('timed out')));
    let reply = Buffer.alloc(0);
    socket.on('error', reject);
    socket.on('connect', () => {
      socket.write(
        `*${args.length}\r\n${args.map((arg) => `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`).join('')}`,
      );
    });
    socket.on('data', (chunk: Buffer) => {
      reply = Buffer.concat([reply, chunk]);
      const text = reply.toString('utf8');
      const lineEnd = text.indexOf('\r\n');
      if (lineEnd < 0) return;
      const head = text.slice(0, lineEnd);
      if (head.startsWith('$')) {
        const length = Number(head.slice(1));
        if (reply.length < Buffer.byteLength(head) + 2 + length) return;
        socket.end();
        resolve(reply.subarray(lineEnd + 2, lineEnd + 2 + length).toString('utf8'));
      } else {
        socket.end();
        if (head.startsWith('-')) reject(new Error(head.slice(1)));
        else resolve(head.slice(1));
      }
    });
  });
}

/** Asks `check` every 50 ms until it answers true; fails naming `what` after `timeoutMs`. */
async function until(timeoutMs: number, what: string, check: () => Promise<boolean>) {
  const timeout = AbortSignal.timeout(timeoutMs);
  while (!(await check())) {
    if (timeout.aborted) throw new Error(`startRedis: timed out waiting for ${what}.`);
    await sleep(50);
  }
}

/** A port the OS says is free now. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
