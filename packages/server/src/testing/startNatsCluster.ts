import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface StartNatsClusterOptions {
  /**
   * How many `nats-server` processes; JetStream needs 3 for a replicated stream to
   * survive the loss of one.
   * @default 3
   */
  size?: number;
  /**
   * The `nats-server` executable.
   * @default process.env.NATS_SERVER, else 'nats-server' from the PATH
   */
  binary?: string;
  /**
   * How long a node may take to answer healthy, and the cluster to elect its JetStream
   * meta leader, before start fails (a busy machine is slow at this).
   * @default 30_000
   */
  readyTimeoutMs?: number;
}

export interface NatsClusterNode {
  /** The node's `server_name`: what JetStream's stream info names as `cluster.leader`. */
  readonly name: string;
  /** Its client URL, `nats://127.0.0.1:<port>`. */
  readonly url: string;
  /** True while its process runs. */
  readonly running: boolean;
  /** SIGKILLs the process (a crash: no graceful leadership hand-off) and waits for it to end. */
  kill(): Promise<void>;
  /** Starts it again on the same ports and store, and waits until it reports healthy. */
  start(): Promise<void>;
}

export interface NatsCluster {
  readonly nodes: readonly NatsClusterNode[];
  /** Every node's client URL: pass them all as `servers` so clients fail over. */
  readonly servers: string[];
  /** The node with this `server_name` (e.g. a stream's `cluster.leader`). */
  node(name: string): NatsClusterNode;
  /** Kills every node and deletes their stores. */
  stop(): Promise<void>;
}

/**
 * Starts a JetStream cluster of `nats-server` processes on free loopback ports, routed to
 * each other, each with its own store in a temporary folder; resolves once every node is
 * healthy and the cluster has a meta leader. For tests that kill a node mid-run: streams
 * created with `num_replicas: 3` keep their messages when any one node dies.
 */
export async function startNatsCluster(
  options: StartNatsClusterOptions = {},
): Promise<NatsCluster> {
  const size = options.size ?? 3;
  if (!(Number.isInteger(size) && size >= 1)) {
    throw new TypeError(`startNatsCluster: size must be a positive integer; got ${size}.`);
  }
  const binary = options.binary ?? process.env.NATS_SERVER ?? 'nats-server';
  const readyTimeoutMs = options.readyTimeoutMs ?? 30_000;
  const dir = await mkdtemp(join(tmpdir(), 'idem-nats-cluster-'));
  const ports = await freePorts(size * 3);
  const specs = Array.from({ length: size }, (_, index) => ({
    name: `n${index + 1}`,
    port: ports[index * 3] as number,
    routePort: ports[index * 3 + 1] as number,
    monitorPort: ports[index * 3 + 2] as number,
  }));
  const clusterName = `idem_${dir.slice(-6).replace(/[^A-Za-z0-9]/g, '')}`;

  const nodes = await Promise.all(
    specs.map(async (spec) => {
      const config = join(dir, `${spec.name}.conf`);
      const routes = specs
        .filter((other) => other !== spec)
        .map((other) => `"nats-route://127.0.0.1:${other.routePort}"`);
      await writeFile(
        config,
        [
          `server_name: ${spec.name}`,
          `listen: "127.0.0.1:${spec.port}"`,
          `http: "127.0.0.1:${spec.monitorPort}"`,
          `jetstream { store_dir: ${JSON.stringify(join(dir, spec.name))} }`,
          `cluster { name: ${clusterName}, listen: "127.0.0.1:${spec.routePort}", routes: [${routes.join(', ')}] }`,
        ].join('\n'),
      );
      return node(spec, binary, config, readyTimeoutMs);
    }),
  );

  const cluster: NatsCluster = {
    nodes,
    servers: nodes.map((each) => each.url),
    node(name) {
      const found = nodes.find((each) => each.name === name);
      if (!found) {
        throw new Error(
          `startNatsCluster: no node named "${name}" (nodes: ${nodes.map((each) => each.name).join(', ')}).`,
        );
      }
      return found;
    },
    async stop() {
      await Promise.all(nodes.map((each) => each.kill()));
      await rm(dir, { recursive: true, force: true });
    },
  };
  try {
    await Promise.all(nodes.map((each) => each.start()));
    await until(readyTimeoutMs, 'the JetStream meta leader to be elected', async () => {
      const jsz = await monitor<{ meta_cluster?: { leader?: string; cluster_size?: number } }>(
        specs[0]?.monitorPort as number,
        '/jsz',
      );
      return Boolean(jsz?.meta_cluster?.leader) && jsz?.meta_cluster?.cluster_size === size;
    });
  } catch (error) {
    await cluster.stop();
    throw error;
  }
  return cluster;
}

function node(
  spec: { name: string; port: number; monitorPort: number },
  binary: string,
  config: string,
  readyTimeoutMs: number,
): NatsClusterNode {
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let stderr = '';
  return {
    name: spec.name,
    url: `nats://127.0.0.1:${spec.port}`,
    get running() {
      return child !== undefined;
    },
    async kill() {
      const current = child;
      if (!current) return;
      current.kill('SIGKILL');
      await exited;
    },
    async start() {
      if (child) return;
      stderr = '';
      const started = spawn(binary, ['-c', config], { stdio: ['ignore', 'ignore', 'pipe'] });
      child = started;
      started.stderr?.on('data', (chunk: Buffer) => {
        stderr = (stderr + chunk.toString('utf8')).slice(-2_000);
      });
      // Never outlive the process that started it, whatever way that process ends.
      const killOnExit = () => started.kill('SIGKILL');
      process.once('exit', killOnExit);
      exited = new Promise((resolve) => {
        started.once('exit', () => {
          process.removeListener('exit', killOnExit);
          if (child === started) child = undefined;
          resolve();
        });
        started.once('error', (error) => {
          stderr += String(error);
          if (child === started) child = undefined;
          resolve();
        });
      });
      await until(readyTimeoutMs, `nats-server ${spec.name} to report healthy`, async () => {
        if (child !== started) {
          throw new Error(`nats-server ${spec.name} (${binary}) exited: ${stderr.trim()}`);
        }
        return (await monitor(spec.monitorPort, '/healthz')) !== undefined;
      });
    },
  };
}

/** A monitoring endpoint's JSON, or `undefined` while the node does not answer 200. */
async function monitor<T>(port: number, path: string): Promise<T | undefined> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, {
      signal: AbortSignal.timeout(2_000),
    });
    if (!response.ok) return undefined;
    return (await response.json()) as T;
  } catch {
    return undefined;
  }
}

async function until(timeoutMs: number, what: string, check: () => Promise<boolean>) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`startNatsCluster: timed out waiting for ${what}.`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Ports the OS says are free now, all distinct (held open together while picked). */
async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
          const server = createServer();
          server.once('error', reject);
          server.listen(0, '127.0.0.1', () => resolve(server));
        }),
    ),
  );
  const ports = servers.map((server) => (server.address() as { port: number }).port);
  await Promise.all(
    servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))),
  );
  return ports;
}
