import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { appendFile, chown, mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import postgres from 'postgres';
import { until } from '../fixtures/deferred.js';
import { type LaggingProxy, laggingProxy } from './laggingProxy.js';

const run = promisify(execFile);

/** Where the PostgreSQL server binaries are (Debian's layout for version 15). */
export const POSTGRES_BIN = process.env.POSTGRES_BIN ?? '/usr/lib/postgresql/15/bin';

const BINARIES = ['initdb', 'pg_ctl', 'pg_basebackup', 'postgres'];

/** Why the failover tests cannot run here (a binary missing), or `undefined` when they can. */
export function missingBinaries(): string | undefined {
  const missing = BINARIES.filter((name) => !existsSync(join(POSTGRES_BIN, name)));
  return missing.length === 0
    ? undefined
    : `PostgreSQL server binaries not found in ${POSTGRES_BIN} (${missing.join(', ')}); set POSTGRES_BIN to their folder`;
}

/** The standby's `cluster_name`, which its WAL receiver gives the primary as `application_name`. */
const STANDBY_NAME = 'idem_standby';

export interface ClusterNode {
  readonly port: number;
  /** `postgres://postgres@127.0.0.1:<port>/<database>`. */
  readonly url: string;
  /** Its data directory. */
  readonly dataDir: string;
}

export interface ReplicatedCluster {
  readonly primary: ClusterNode;
  readonly standby: ClusterNode;
  /**
   * Both nodes in one URL, primary first, with `target_session_attrs`: what an app gives
   * postgres-js so that its connections find whichever node takes writes.
   */
  readonly url: string;
  /**
   * SIGKILLs the primary's postmaster (a crash: no shutdown checkpoint, no goodbye to
   * clients) and waits until it and its children are gone; answers when the signal was
   * sent (`performance.now()`).
   */
  killPrimary(): Promise<number>;
  /** `pg_ctl promote` on the standby; resolves once it takes writes. */
  promoteStandby(): Promise<void>;
  /** Stops both nodes (`pg_ctl -m immediate`), ends what is left of the primary, deletes the directory. */
  stop(): Promise<void>;
}

export interface ReplicatedClusterOptions {
  /** `true`: the standby is named in `synchronous_standby_names`, so a commit returns once the standby has flushed it; `false`: asynchronous streaming. */
  synchronous: boolean;
  /** A database created on the primary (and so on the standby) once the standby streams. */
  database: string;
  /**
   * `target_session_attrs` of `url`. Not `read-write`: postgres.js 3.4.9 judges it by
   * `default_transaction_read_only` alone, which a PostgreSQL 14+ hot standby reports
   * `off`, so its connections would land on the standby.
   * @default 'primary'
   */
  targetSessionAttrs?: string;
  /**
   * Holds back the WAL the standby receives by this long (a {@link laggingProxy} on its
   * replication connection, cut when the primary is killed).
   * @default 0 (the standby connects to the primary directly)
   */
  replicationDelayMs?: number;
  /**
   * Given `stop` as soon as the directory exists, before anything starts: a test's cleanup
   * then ends the nodes even when the start itself is what hangs.
   */
  onStop?: (stop: () => Promise<void>) => void;
}

/** postgres-js logs NOTICEs by default. */
const quiet = { onnotice: () => {} };

/**
 * Starts a PostgreSQL 15 primary and a streaming standby (`pg_basebackup -R`) on two free
 * loopback ports, in a temporary directory owned by the `postgres` OS user (the server
 * refuses to run as root, so under root every binary runs through `runuser -u postgres`).
 * Resolves once the standby streams (and, if synchronous, is the primary's sync standby)
 * and `database` exists. Never touches the machine's own server.
 */
export async function startReplicatedCluster(
  options: ReplicatedClusterOptions,
): Promise<ReplicatedCluster> {
  const root = await mkdtemp(join(tmpdir(), 'idem-failover-'));
  const asPostgres = await runnerFor(root);
  const [primaryPort, standbyPort] = [await freePort(), await freePort()];
  const node = (port: number, name: string): ClusterNode => ({
    port,
    url: `postgres://postgres@127.0.0.1:${port}/${options.database}`,
    dataDir: join(root, name),
  });
  const primary = node(primaryPort, 'primary');
  const standby = node(standbyPort, 'standby');
  /** The primary's postmaster and children, recorded when it is killed, ended at `stop`. */
  const orphans: number[] = [];
  let lag: LaggingProxy | undefined;
  const stop = async () => {
    await lag?.cut();
    for (const { dataDir } of [standby, primary]) {
      if (existsSync(join(dataDir, 'postmaster.pid'))) {
        await asPostgres('pg_ctl', ['-D', dataDir, '-m', 'immediate', '-w', 'stop']).catch(
          () => undefined,
        );
      }
    }
    for (const pid of orphans) if (isAlive(pid)) process.kill(pid, 'SIGKILL');
    await rm(root, { recursive: true, force: true });
  };
  options.onStop?.(stop);
  try {
    await initPrimary(asPostgres, primary, root, options.synchronous);
    await asPostgres('pg_basebackup', [
      ...['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres'],
      ...['-D', standby.dataDir, '-R', '-X', 'stream', '--checkpoint=fast', '--no-sync'],
    ]);
    // Promoted, the standby has no standby of its own: with the primary's list of synchronous
    // standbys it would wait forever on every commit (what a cluster manager rewrites at
    // failover, so the harness sets it up front).
    if (options.replicationDelayMs) {
      lag = await laggingProxy(primaryPort, options.replicationDelayMs);
      // postgresql.auto.conf is read last: this primary_conninfo replaces pg_basebackup's.
      await appendFile(
        join(standby.dataDir, 'postgresql.auto.conf'),
        `primary_conninfo = 'host=127.0.0.1 port=${lag.port} user=postgres'\n`,
      );
    }
    await appendFile(
      join(standby.dataDir, 'postgresql.conf'),
      `\nport = ${standbyPort}\ncluster_name = '${STANDBY_NAME}'\nsynchronous_standby_names = ''\n`,
    );
    await startNode(asPostgres, standby);
    await untilStreaming(primary, options.synchronous);
    await admin(primary, `create database "${options.database}"`);
    // A synchronous standby acknowledges WAL it has flushed, not yet replayed.
    await until(
      async () =>
        (await admin(standby, `select 1 from pg_database where datname = '${options.database}'`))
          .length > 0,
      { what: 'the standby to replay the new database', timeoutMs: 60_000, intervalMs: 20 },
    );
  } catch (error) {
    await stop();
    throw error;
  }
  const attrs = options.targetSessionAttrs ?? 'primary';
  return {
    primary,
    standby,
    url: `postgres://postgres@127.0.0.1:${primaryPort},127.0.0.1:${standbyPort}/${options.database}?target_session_attrs=${attrs}`,
    async killPrimary() {
      const pid = Number(
        (await readFile(join(primary.dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0],
      );
      const children = await childrenOf(pid);
      orphans.push(pid, ...children);
      process.kill(pid, 'SIGKILL');
      const killedAt = performance.now();
      await lag?.cut();
      // Each child notices its postmaster's death and exits on its own (a backend waiting for
      // a synchronous standby's reply exits without answering its client).
      await until(() => orphans.every((each) => !isAlive(each)), {
        what: "the killed primary's processes to exit",
        timeoutMs: 60_000,
      });
      return killedAt;
    },
    async promoteStandby() {
      await asPostgres('pg_ctl', ['-D', standby.dataDir, '-w', '-t', '120', 'promote']);
    },
    stop,
  };
}

type AsPostgres = (binary: string, args: string[]) => Promise<void>;

/** Runs the server's binaries as the `postgres` OS user when this process is root, else as this user; `root` is made theirs. */
async function runnerFor(root: string): Promise<AsPostgres> {
  const isRoot = process.getuid?.() === 0;
  if (isRoot) {
    const id = async (flag: string) => {
      try {
        return Number((await run('id', [flag, 'postgres'])).stdout.trim());
      } catch (error) {
        throw new Error(
          'PostgreSQL refuses to run as root, and there is no `postgres` OS user to run it as: create one, or run the tests as another user',
          { cause: error },
        );
      }
    };
    await chown(root, await id('-u'), await id('-g'));
  }
  return async (binary, args) => {
    const path = join(POSTGRES_BIN, binary);
    const [command, commandArgs] = isRoot
      ? ['runuser', ['-u', 'postgres', '--', path, ...args]]
      : [path, args];
    try {
      // cwd: the postgres user may not be allowed into the test's own directory.
      await run(command, commandArgs, { cwd: root, timeout: 180_000 });
    } catch (error) {
      const { stderr = '', stdout = '' } = error as { stderr?: string; stdout?: string };
      throw new Error(`${binary} ${args.join(' ')} failed: ${stderr || stdout}`, { cause: error });
    }
  };
}

async function initPrimary(
  asPostgres: AsPostgres,
  primary: ClusterNode,
  root: string,
  synchronous: boolean,
): Promise<void> {
  await asPostgres('initdb', [
    ...['-D', primary.dataDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C'],
    ...['--no-sync', '--no-instructions'],
  ]);
  // fsync off: the tests kill processes, not the machine, and a dead process's writes are
  // in the page cache all the same; what a crash loses is what never reached the standby.
  const settings = [
    `port = ${primary.port}`,
    "listen_addresses = '127.0.0.1'",
    `unix_socket_directories = '${root}'`,
    'wal_level = replica',
    'max_wal_senders = 4',
    'hot_standby = on',
    'fsync = off',
    'shared_buffers = 32MB',
    'max_connections = 80',
    'synchronous_commit = on',
    `synchronous_standby_names = '${synchronous ? STANDBY_NAME : ''}'`,
  ];
  await appendFile(join(primary.dataDir, 'postgresql.conf'), `\n${settings.join('\n')}\n`);
  await startNode(asPostgres, primary);
}

function startNode(asPostgres: AsPostgres, node: ClusterNode): Promise<void> {
  return asPostgres('pg_ctl', [
    ...['-D', node.dataDir, '-l', join(node.dataDir, 'server.log')],
    ...['-w', '-t', '120', 'start'],
  ]);
}

async function admin<T extends object>(node: ClusterNode, statement: string): Promise<T[]> {
  const url = new URL(node.url);
  url.pathname = '/postgres';
  const sql = postgres(url.toString(), { ...quiet, max: 1, connect_timeout: 10 });
  try {
    return [...(await sql.unsafe<T[]>(statement))];
  } finally {
    await sql.end({ timeout: 5 });
  }
}

function untilStreaming(primary: ClusterNode, synchronous: boolean): Promise<true> {
  const wanted = synchronous ? 'sync' : 'async';
  return until(
    async () => {
      const [row] = await admin<{ state: string; sync_state: string }>(
        primary,
        `select state, sync_state from pg_stat_replication where application_name = '${STANDBY_NAME}'`,
      );
      return row?.state === 'streaming' && row.sync_state === wanted;
    },
    { what: `the standby to stream (${wanted})`, timeoutMs: 120_000, intervalMs: 50 },
  );
}

/** A loopback port nothing listens on now. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

async function childrenOf(pid: number): Promise<number[]> {
  const { stdout } = await run('ps', ['-o', 'pid=', '--ppid', String(pid)]).catch(() => ({
    stdout: '',
  }));
  return stdout
    .split('\n')
    .map((line) => Number(line.trim()))
    .filter((child) => child > 0);
}

/** Whether `pid` runs (a zombie, dead but not yet reaped by whoever adopted it, does not). */
function isAlive(pid: number): boolean {
  try {
    // The state is the field after the command name, which is in parentheses.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.charAt(stat.lastIndexOf(')') + 2) !== 'Z';
  } catch {
    return false;
  }
}
