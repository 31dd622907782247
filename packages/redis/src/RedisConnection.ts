import { CommandBound } from './commandBound.js';
import type { LuaScript } from './scripts.js';

/** What the store sends `EVALSHA`/`EVAL` with. */
interface ScriptArguments {
  keys: string[];
  arguments: string[];
}

/** The part of a node-redis client (or cluster) that runs scripts. */
interface ScriptRunner {
  evalSha(sha1: string, options: ScriptArguments): Promise<unknown>;
  eval(script: string, options: ScriptArguments): Promise<unknown>;
}

/** The part of node-redis's `createClient()` the store uses. */
export interface RedisNodeConnection extends ScriptRunner {
  scanIterator(options: { MATCH: string; COUNT: number }): AsyncIterable<unknown[]>;
}

/** The part of node-redis's `createCluster()` the store uses. */
export interface RedisClusterConnection<Node = unknown> extends ScriptRunner {
  readonly masters: readonly Node[];
  nodeClient(node: Node): Promise<RedisNodeConnection>;
}

/**
 * A connected node-redis client, `createClient()` (one node, or a Redis Sentinel/proxy
 * endpoint) or `createCluster()` (a Redis Cluster). Only the methods the store calls are
 * named, so any RESP mode or module set fits.
 */
// biome-ignore lint/suspicious/noExplicitAny: node-redis's node type is generic over the client's modules.
export type RedisConnection = RedisNodeConnection | RedisClusterConnection<any>;

/** Sends a script on the node that owns `key`, with `args` as its ARGV. */
export type ScriptSender = (script: LuaScript, key: string, args: string[]) => Promise<unknown>;

/**
 * What node-redis 6 keeps of a client's command options, and how it makes a client with
 * others. Read, not declared in {@link RedisConnection}: a client without them (another
 * major version) is used as it is.
 */
interface CommandOptionsOf {
  _commandOptions?: { timeout?: number };
  _keyPrefix?: unknown;
  withCommandOptions?(options: object): ScriptRunner & CommandOptionsOf;
  /** One node's raw command: the arguments as sent, no key prefix, the reply untransformed. */
  sendCommand?(args: string[]): Promise<unknown>;
}

/** How the store sends one script: `EVALSHA` with `EVAL` after NOSCRIPT. */
type ScriptCall = (script: LuaScript, key: string, args: string[]) => Promise<unknown>;

/**
 * How scripts go to `client`: one node's raw `sendCommand` where it has one and no key
 * prefix of its own (node-redis's typed `evalSha` costs a command parser and its key
 * handling per call), else `evalSha`/`eval` (a cluster routes by the key; a client with a
 * `keyPrefix` adds it to the key as before).
 */
function scriptCall(client: ScriptRunner & CommandOptionsOf): ScriptCall {
  const { sendCommand } = client;
  if ('masters' in client || client._keyPrefix !== undefined || sendCommand === undefined) {
    return (script, key, args) => runScript(client, script, key, args);
  }
  const send = (args: string[]) => sendCommand.call(client, args);
  return async (script, key, args) => {
    try {
      return await send(['EVALSHA', script.sha1, '1', key, ...args]);
    } catch (error) {
      if (!isNoScript(error)) throw error;
      return send(['EVAL', script.source, '1', key, ...args]);
    }
  };
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/**
 * Sends one plain command (`args`, the command's name first) to the one node a client
 * talks to; `what` and `key` name it in a timeout's error.
 */
export type CommandSender = (what: string, key: string, args: string[]) => Promise<unknown>;

/** How the store talks to Redis: scripts, and plain commands where the client allows them. */
export interface RedisSenders {
  script: ScriptSender;
  /**
   * Plain commands on the one node: only on a `createClient()` without a key prefix of its
   * own (a cluster routes by key, and a client's `keyPrefix` would not reach a raw command).
   */
  command: CommandSender | undefined;
}

/** One node's raw `sendCommand`, or undefined when `client` is not a plain one-node client. */
function rawCommand(client: ScriptRunner & CommandOptionsOf): CommandSender | undefined {
  const { sendCommand } = client;
  if ('masters' in client || client._keyPrefix !== undefined || sendCommand === undefined) {
    return undefined;
  }
  return (_what, _key, args) => sendCommand.call(client, args);
}

/**
 * One client as the store sends through it: its senders without the store's bound, the
 * bound (see `redisSenders`), and how many of its commands are in flight.
 */
interface Connection extends RedisSenders {
  readonly client: RedisConnection;
  readonly bound: CommandBound | undefined;
  inFlight: number;
}

/**
 * node-redis 6 bounds every command by its client's `commandOptions.timeout` (5 s unless
 * set) with an `AbortSignal.timeout` of its own, which costs several times what the
 * command costs in the client once calls overlap. The store keeps that bound, the same
 * number of milliseconds, with one timer for all its calls on the client
 * ({@link CommandBound}), and sends through a view of the client without it. A client whose
 * timeout is off (0) gets no bound, as before.
 */
function connectionOf(client: RedisConnection): Connection {
  const runner = client as RedisConnection & CommandOptionsOf;
  const { _commandOptions: options, withCommandOptions } = runner;
  const timeoutMs = options?.timeout;
  if (!(typeof timeoutMs === 'number' && timeoutMs > 0) || withCommandOptions === undefined) {
    const [script, command] = [scriptCall(runner), rawCommand(runner)];
    return { client, script, command, bound: undefined, inFlight: 0 };
  }
  const unbounded = withCommandOptions.call(client, { ...options, timeout: 0 });
  const [script, command] = [scriptCall(unbounded), rawCommand(unbounded)];
  return { client, script, command, bound: new CommandBound(timeoutMs), inFlight: 0 };
}

/** `send()`, bounded by `connection`'s timeout where it has one. */
function boundOn<T>(connection: Connection, what: string, key: string, send: () => Promise<T>) {
  return connection.bound ? connection.bound.run(what, key, send) : send();
}

/**
 * The store's ways of sending to Redis through `clients`, made once per store: one client's
 * senders, or several connections to one Redis sending as one. Then a key with commands in
 * flight sends its next ones on the same connection, so one key's commands keep the order
 * they were sent in, as on a single connection (a command that outlived its timeout counts
 * as in flight until Redis answers it); any other key goes to the connection with the fewest
 * commands in flight, passing over one node-redis is reconnecting. Under load that sends a
 * call's next command on the connection whose replies are being handled, so the connections
 * take turns: Redis runs one's commands while this process handles the other's replies,
 * where a single connection leaves one of the two idle while the other works. Plain
 * commands only where every connection takes them.
 */
export function redisSenders(
  clients: readonly [RedisConnection, ...RedisConnection[]],
): RedisSenders {
  const connections = clients.map(connectionOf);
  const [first] = connections as [Connection];
  if (connections.length === 1) {
    const { script, command, bound } = first;
    if (!bound) return { script, command };
    return {
      script: (sent, key, args) =>
        bound.run(`${sent.name} script`, key, () => script(sent, key, args)),
      command:
        command && ((what, key, args) => bound.run(what, key, () => command(what, key, args))),
    };
  }
  /** Each key with commands in flight: its connection, and how many. */
  const busy = new Map<string, { connection: Connection; commands: number }>();
  const on = <Answer>(
    what: string,
    key: string,
    send: (connection: Connection) => Promise<Answer>,
  ): Promise<Answer> => {
    let entry = busy.get(key);
    if (entry === undefined) {
      // A connection that is reconnecting would hold the command until it is back.
      let connection: Connection | undefined;
      for (const other of connections) {
        if (!isReady(other.client)) continue;
        if (connection === undefined || other.inFlight < connection.inFlight) connection = other;
      }
      entry = { connection: connection ?? first, commands: 0 };
      busy.set(key, entry);
    }
    const held = entry;
    held.commands++;
    held.connection.inFlight++;
    const done = () => {
      held.connection.inFlight--;
      if (--held.commands === 0) busy.delete(key);
    };
    let sent: Promise<Answer>;
    try {
      sent = send(held.connection);
    } catch (error) {
      done();
      throw error;
    }
    // Counted until Redis answers: the bound below may give up on it sooner.
    sent.then(done, done);
    return boundOn(held.connection, what, key, () => sent);
  };
  const script: ScriptSender = (sent, key, args) =>
    on(`${sent.name} script`, key, (connection) => connection.script(sent, key, args));
  if (!connections.every((connection) => connection.command !== undefined)) {
    return { script, command: undefined };
  }
  const command: CommandSender = (what, key, args) =>
    on(what, key, (connection) => (connection.command as CommandSender)(what, key, args));
  return { script, command };
}

/**
 * Whether node-redis has `client` connected: while it reconnects (`isReady` false) it
 * queues commands until it is back. A client without `isReady` counts as ready.
 */
export function isReady(client: RedisConnection): boolean {
  return (client as { isReady?: unknown }).isReady !== false;
}

/**
 * Runs `script` on the node that owns `key`: `EVALSHA` first, and `EVAL` (which also caches
 * the script) when the server answers NOSCRIPT: after a restart, a failover to a replica
 * that never saw it, a `SCRIPT FLUSH`, or a slot moved to another node.
 */
async function runScript(
  client: ScriptRunner,
  script: LuaScript,
  key: string,
  args: string[],
): Promise<unknown> {
  const options = { keys: [key], arguments: args };
  try {
    return await client.evalSha(script.sha1, options);
  } catch (error) {
    if (!isNoScript(error)) throw error;
    return client.eval(script.source, options);
  }
}

/** Every key matching `pattern`, a page at a time, on one node or on every cluster master. */
export async function* scanKeys(
  client: RedisConnection,
  pattern: string,
): AsyncGenerator<string[]> {
  const nodes =
    'masters' in client
      ? await Promise.all(client.masters.map((master) => client.nodeClient(master)))
      : [client];
  for (const node of nodes) {
    for await (const keys of node.scanIterator({ MATCH: pattern, COUNT: 1_000 })) {
      yield keys.map(String);
    }
  }
}
