import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { isConfigurationError, isLeaseLostError } from '@idem/core';
import { cachedStore, leaseTokenOf } from '@idem/core/store';
import { claimedToken, storeContract } from '@idem/core/testing/contract';
import { createClient } from 'redis';
import { describe, expect, it } from 'vitest';
import { redisStore } from '../src/index.js';
import { recordKey } from '../src/recordKey.js';
import { scripts } from '../src/scripts.js';
import { startRedisServer } from '../src/testing/index.js';
import { answersAs } from '../src/testing/startRedis.js';
import { at, freshStore, request, serverTimeOf, until, useRedis } from './redisFixtures.js';
import { redisRisks } from './redisRisks.js';

describe('redisStore on one redis-server', () => {
  const redis = useRedis(
    () => startRedisServer(),
    (server) => createClient({ url: server.url }).connect(),
  );

  // A prefix per test: every test starts with no keys, and none reads another's.
  storeContract('redisStore on one node', async (clock) => ({
    store: freshStore(redis().client, { clock }).store,
  }));

  storeContract('cachedStore over redisStore', async (clock) => ({
    store: cachedStore(freshStore(redis().client, { clock }).store, { maxEntries: 100, clock }),
  }));

  redisRisks('one node', () => ({ client: redis().client, nodes: [redis().client] }));

  describe('a new key and a replay as plain commands', () => {
    /** How many times Redis ran each command so far, scripts' own included (`INFO commandstats`). */
    const commandCounts = async () => {
      const info = String(await redis().client.sendCommand(['INFO', 'commandstats']));
      const count = (command: string) =>
        Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
      return {
        set: count('set'),
        get: count('get'),
        pexpiretime: count('pexpiretime'),
        scripts: count('evalsha') + count('eval'),
      };
    };
    const serverTime = () => serverTimeOf(redis().client);

    it("claims a new key with no script, stamped with the server's millisecond of its SET", async () => {
      const { store, keyPrefix } = freshStore(redis().client);
      // Redis gets the completion script once (a first EVALSHA fails NOSCRIPT, then EVAL).
      const first = await store.claim(request({ key: 'first' }));
      await store.complete(leaseTokenOf(first.record), { kind: 'success', value: 1 }, 60_000);
      const loaded = await commandCounts();

      const serverBefore = await serverTime();
      const fresh = await store.claim(request({ key: 'new', leaseMs: 45_000, ttlMs: 90_000 }));
      const serverAfter = await serverTime();
      expect(fresh).toMatchObject({ status: 'claimed', takeover: false });
      const { record } = fresh;
      expect(record).toMatchObject({ version: 1, attempts: 1, status: 'in_progress', steps: {} });
      expect(record.createdAt).toBeGreaterThanOrEqual(serverBefore);
      expect(record.createdAt).toBeLessThanOrEqual(serverAfter);
      expect(record.lockedUntil).toBe(record.createdAt + 45_000);
      expect(record.expiresAt).toBe(record.createdAt + 90_000);
      // Redis keeps a key through its expiry's millisecond: the key is gone from the end on.
      const expireAt = Number(
        await redis().client.sendCommand([
          'PEXPIRETIME',
          recordKey(keyPrefix, record.scope, 'new'),
        ]),
      );
      expect(expireAt).toBe(record.createdAt + 90_000 - 1);

      await store.complete(leaseTokenOf(record), { kind: 'success', value: 'paid' }, 60_000);
      expect(await store.claim(request({ key: 'new' }))).toMatchObject({
        status: 'replay',
        record: { outcome: { kind: 'success', value: 'paid' }, version: 1 },
      });
      expect(await store.claim(request({ key: 'new', fingerprint: 'other' }))).toMatchObject({
        status: 'mismatch',
      });
      const after = await commandCounts();
      // The new claim, the replay and the mismatch: one SET each; the completion: one script
      // (which writes with a SET of its own).
      expect(after.set - loaded.set).toBe(4);
      expect(after.scripts - loaded.scripts).toBe(1);
      expect(await store.get(record.scope, 'new')).toMatchObject({
        createdAt: record.createdAt,
        expiresAt: expect.any(Number),
      });
    });

    it('reads a record a plain SET wrote with the times its claim answered, in every script', async () => {
      const { store } = freshStore(redis().client);
      const before = await commandCounts();
      const claimed = await store.claim(request({ key: 'relative', leaseMs: 30_000 }));
      expect((await commandCounts()).scripts - before.scripts).toBe(0); // the plain SET wrote it
      const token = claimedToken(claimed);
      // get (the read script) turns the header relative to the expiry into the same times.
      expect(await store.get(token.scope, 'relative')).toEqual(claimed.record);
      // The claim script sees the holder's lease, and the fence takes the token.
      const busy = await store.claim(request({ key: 'relative' }));
      expect(busy.status).toBe('in_progress');
      const retryAfterMs = busy.status === 'in_progress' ? busy.retryAfterMs : -1;
      expect(retryAfterMs).toBeGreaterThan(0);
      expect(retryAfterMs).toBeLessThanOrEqual(30_000);
      await store.saveStep(token, 'charge', { id: 'ch_1' });
      expect(await store.get(token.scope, 'relative')).toEqual({
        ...claimed.record,
        steps: { charge: { id: 'ch_1' } },
      });
      await store.heartbeat(token, 60_000);
      const renewed = await store.get(token.scope, 'relative');
      expect(renewed?.createdAt).toBe(claimed.record.createdAt);
      expect(renewed?.lockedUntil).toBeGreaterThan(claimed.record.lockedUntil ?? 0);
      await store.complete(token, { kind: 'success', value: 'done' }, 60_000);
      expect(await store.get(token.scope, 'relative')).toMatchObject({
        status: 'completed',
        createdAt: claimed.record.createdAt,
        steps: { charge: { id: 'ch_1' } },
      });
    });

    it('completes a record the plain SET wrote in a first pass, as the general completion would', async () => {
      const { store, keyPrefix } = freshStore(redis().client);
      const { scope } = request();
      const lives = { leaseMs: 30_000, ttlMs: 90_000 };
      const fast = claimedToken(await store.claim(request({ key: 'fast', ...lives })));
      const general = claimedToken(await store.claim(request({ key: 'general', ...lives })));
      const outcome = JSON.stringify({ kind: 'success', value: { orderId: 7 } });
      await store.complete(fast, { kind: 'success', value: { orderId: 7 } }, 60_000);
      // The general completion, sent straight: the script without the first pass.
      const sent = await redis().client.sendCommand([
        'EVAL',
        scripts.complete.source,
        '1',
        recordKey(keyPrefix, scope, 'general'),
        '',
        '1',
        String(general.version),
        String(general.createdAt),
        outcome,
        '60000',
      ]);
      expect(Number(sent)).toBe(1);
      await expect(
        store.complete(fast, { kind: 'success', value: 'again' }, 60_000),
      ).rejects.toSatisfy(isLeaseLostError);
      for (const [key, token] of [
        ['fast', fast],
        ['general', general],
      ] as const) {
        const done = await store.get(scope, key);
        expect(done).toEqual({
          scope,
          key,
          fingerprint: request().fingerprint,
          status: 'completed',
          version: 1,
          attempts: 1,
          createdAt: token.createdAt,
          lockedUntil: null,
          completedAt: expect.any(Number),
          expiresAt: (done?.completedAt ?? 0) + 60_000,
          outcome: { kind: 'success', value: { orderId: 7 } },
          steps: {},
        });
        const text = String(
          await redis().client.sendCommand(['GET', recordKey(keyPrefix, scope, key)]),
        );
        expect(text).toBe(
          `completed 1 ${token.createdAt} - ${done?.expiresAt} 1 ${done?.completedAt}\n${JSON.stringify(request().fingerprint)}\n${outcome}\n`,
        );
        const expiry = await redis().client.sendCommand([
          'PEXPIRETIME',
          recordKey(keyPrefix, scope, key),
        ]);
        expect(Number(expiry)).toBe((done?.expiresAt ?? 0) - 1);
      }
    });

    it('completes a new record in its first pass: one GET, one PEXPIRETIME', async () => {
      const { store } = freshStore(redis().client);
      const token = claimedToken(await store.claim(request({ key: 'one-pass' })));
      const before = await commandCounts();
      await store.complete(token, { kind: 'success', value: 1 }, 60_000);
      const after = await commandCounts();
      // The script with the first pass ran, and the record stopped it: one read of each.
      const cached = await redis().client.sendCommand([
        'SCRIPT',
        'EXISTS',
        scripts.completeNewKey.sha1,
      ]);
      expect(cached).toEqual([1]);
      expect([after.get - before.get, after.pexpiretime - before.pexpiretime]).toEqual([1, 1]);
      expect(await store.claim(request({ key: 'one-pass' }))).toMatchObject({
        status: 'replay',
        record: { outcome: { kind: 'success', value: 1 } },
      });
    });

    it('claims and completes by the scripts alone for a user whose ACL refuses PEXPIRETIME', async () => {
      const user = `no-expiretime-${Date.now()}`;
      await redis().client.sendCommand([
        'ACL',
        'SETUSER',
        user,
        'on',
        'nopass',
        '~*',
        '+@all',
        '-pexpiretime',
      ]);
      const client = await createClient({
        url: redis().server.url,
        username: user,
        password: 'any',
      }).connect();
      try {
        const { store } = freshStore(client);
        for (const key of ['acl-1', 'acl-2']) {
          const token = claimedToken(await store.claim(request({ key })));
          await store.complete(token, { kind: 'success', value: key }, 60_000);
          expect(await store.claim(request({ key }))).toMatchObject({
            status: 'replay',
            record: { outcome: { kind: 'success', value: key } },
          });
        }
      } finally {
        await client.close();
        await redis().client.sendCommand(['ACL', 'DELUSER', user]);
      }
    });

    it('leaves a key in progress to the claim script', async () => {
      const { store } = freshStore(redis().client);
      await store.claim(request({ key: 'warm' }));
      const holder = claimedToken(await store.claim(request({ key: 'busy' })));
      const before = await commandCounts();
      expect((await store.claim(request({ key: 'busy' }))).status).toBe('in_progress');
      const after = await commandCounts();
      expect(after.set - before.set).toBe(1); // the SET NX that found "busy" in progress
      expect(after.scripts - before.scripts).toBe(1);
      await store.release(holder);
    });

    it('refuses a key that holds a value which is not a record, on either path', async () => {
      const { store, keyPrefix } = freshStore(redis().client);
      const scope = request().scope;
      await redis().client.sendCommand(['SET', recordKey(keyPrefix, scope, 'junk'), 'completed x']);
      await redis().client.sendCommand(['SET', recordKey(keyPrefix, scope, 'text'), 'hello']);
      for (const key of ['junk', 'text']) {
        await expect(store.claim(request({ key }))).rejects.toThrow(
          /holds a value that is not an idempotency record/,
        );
      }
    });

    it('fences a holder out of the next incarnation a plain SET wrote', async () => {
      const { store, keyPrefix } = freshStore(redis().client);
      const lives = { leaseMs: 3_000, ttlMs: 3_000 };
      const before = await commandCounts();
      const old = claimedToken(await store.claim(request({ key: 'again', ...lives })));
      const redisKey = recordKey(keyPrefix, old.scope, 'again');
      await until('Redis to delete the expired record', async () => {
        return Number(await redis().client.sendCommand(['EXISTS', redisKey])) === 0;
      });
      // The next claim writes version 1 afresh, at a later millisecond.
      const next = await store.claim(request({ key: 'again' }));
      // Both incarnations were written by the plain SET, not by the script.
      expect((await commandCounts()).scripts - before.scripts).toBe(0);
      expect(next.record.version).toBe(1);
      expect(next.record.createdAt).toBeGreaterThanOrEqual(old.createdAt + 3_000);
      await expect(
        store.complete(old, { kind: 'success', value: 'late' }, 60_000),
      ).rejects.toSatisfy(isLeaseLostError);
    });

    it("gives every record a script writes its key's expiry at the millisecond before its end", async () => {
      const { store, keyPrefix } = freshStore(redis().client);
      const { scope } = request();
      const expiryOf = async (key: string) =>
        Number(await redis().client.sendCommand(['PEXPIRETIME', recordKey(keyPrefix, scope, key)]));
      // Redis 7.0 reads its clock again for a script's SET: an expiry given as a span from
      // the script's TIME landed a millisecond late now and then (about 1 write in 200
      // here), and the plain path then sent that key's replays to the script.
      const late: string[] = [];
      await Promise.all(
        Array.from({ length: 3_000 }, async (_, index) => {
          const key = `expiry-${index}`;
          const token = claimedToken(
            await store.claim(request({ key, leaseMs: 30_000, ttlMs: 60_000 })),
          );
          // The last thousand are completed as the plain SET wrote them (the first pass).
          if (index < 2_000) {
            await store.heartbeat(token, 90_000); // the lease now ends after the TTL
            const held = await store.get(scope, key);
            if ((await expiryOf(key)) !== (held?.lockedUntil ?? 0) - 1)
              late.push(`${key} in progress`);
          }
          await store.complete(token, { kind: 'success', value: index }, 60_000);
          const done = await store.get(scope, key);
          if ((await expiryOf(key)) !== (done?.expiresAt ?? 0) - 1) late.push(`${key} completed`);
        }),
      );
      expect(late).toEqual([]);
    });

    it('refuses a new record whose expiry was removed: its times are lost', async () => {
      const { store, keyPrefix } = freshStore(redis().client);
      const claimed = claimedToken(await store.claim(request({ key: 'persisted' })));
      await redis().client.sendCommand([
        'PERSIST',
        recordKey(keyPrefix, claimed.scope, 'persisted'),
      ]);
      await expect(store.get(claimed.scope, 'persisted')).rejects.toThrow(/expiry was removed/);
      await expect(store.claim(request({ key: 'persisted' }))).rejects.toThrow(
        /expiry was removed/,
      );
      await expect(store.complete(claimed, { kind: 'success', value: 1 }, 60_000)).rejects.toThrow(
        /expiry was removed/,
      );
    });
  });

  it('knows its throwaway server by its process, not by any answer on the port', async () => {
    const { server, client } = redis();
    const info = String(await client.sendCommand(['INFO', 'server']));
    const pid = Number(/\r\nprocess_id:(\d+)\r\n/.exec(info)?.[1]);
    expect(pid).toBeGreaterThan(0);
    expect(await answersAs(server.port, pid)).toBe(true);
    // Another process on the port (a server another test started there first) is not it.
    expect(await answersAs(server.port, pid + 1)).toBe(false);
    expect(await answersAs(server.port, undefined)).toBe(false);
  });

  it("keeps a record under the client's own keyPrefix", async () => {
    const client = await createClient({ url: redis().server.url, keyPrefix: 'app:' }).connect();
    try {
      const { store, keyPrefix } = freshStore(client);
      const claim = await store.claim(request({ key: 'prefixed' }));
      expect(claim.status).toBe('claimed');
      const key = recordKey(keyPrefix, request().scope, 'prefixed');
      expect(Number(await redis().client.sendCommand(['EXISTS', `app:${key}`]))).toBe(1);
      expect(Number(await redis().client.sendCommand(['EXISTS', key]))).toBe(0);
      expect((await store.claim(request({ key: 'prefixed' }))).status).toBe('in_progress');
    } finally {
      await client.close();
    }
  });

  it("fails a call Redis does not answer within the client's command timeout", async () => {
    const client = await createClient({
      url: redis().server.url,
      commandOptions: { timeout: 3_000 },
    }).connect();
    try {
      const { store, keyPrefix } = freshStore(client);
      await store.claim(request({ key: 'before' }));
      const paused = recordKey(keyPrefix, request().scope, 'paused');
      // Redis holds every write (the claim's SET or script, and what the client sends after
      // it) until the pause ends or is lifted; reads from other clients go on.
      await redis().client.sendCommand(['CLIENT', 'PAUSE', '60000', 'WRITE']);
      try {
        await expect(store.claim(request({ key: 'paused' }))).rejects.toThrow(
          /did not answer the claim (script|\(SET NX\)) on .* within 3000 ms/,
        );
        // Failed while Redis still held it: the claim has not run yet.
        expect(Number(await redis().client.sendCommand(['EXISTS', paused]))).toBe(0);
      } finally {
        await redis().client.sendCommand(['CLIENT', 'UNPAUSE']);
      }
      // Once the pause is lifted, the claim Redis ran late is there, and the store goes on.
      await until('Redis to run the held claim', async () => {
        return Number(await redis().client.sendCommand(['EXISTS', paused])) === 1;
      });
      expect(await store.get(request().scope, 'paused')).not.toBeNull();
      expect((await store.claim(request({ key: 'after' }))).status).toBe('claimed');
    } finally {
      await client.close();
    }
  });
});

describe('redisStore on two connections to one redis-server', () => {
  const redis = useRedis(
    () => startRedisServer(),
    async (server) => {
      const clients = await Promise.all(
        [0, 1].map(() => createClient({ url: server.url }).connect()),
      );
      return { clients, close: () => Promise.all(clients.map((client) => client.close())) };
    },
  );
  const clients = () => redis().client.clients;

  storeContract('redisStore on two connections', async (clock) => ({
    store: freshStore(clients(), { clock }).store,
  }));

  redisRisks('two connections', () => ({ client: clients(), nodes: [at(clients(), 0)] }));

  it("sends a key's commands in flight together on one connection, and concurrent calls on both", async () => {
    const addresses = await Promise.all(
      clients().map(async (client) => {
        const info = String(await client.sendCommand(['CLIENT', 'INFO']));
        return /\baddr=(\S+)/.exec(info)?.[1];
      }),
    );
    const monitor = await createClient({ url: redis().server.url }).connect();
    // Each command as Redis received it, by the address of the connection that sent it.
    const seen: { address: string; command: string; key: string }[] = [];
    try {
      await monitor.monitor((line) => {
        const sent = /^\S+ \[\d+ ([^\]]+)\] (.*)$/.exec(String(line));
        if (!sent || sent[1] === 'lua') return;
        const args = [...(sent[2] as string).matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((arg) => arg[1]);
        const [command = '', second = '', , fourth = ''] = args;
        const key =
          command.toUpperCase() === 'EVALSHA' || command.toUpperCase() === 'EVAL' ? fourth : second;
        seen.push({ address: sent[1] as string, command, key });
      });
      const { store, keyPrefix } = freshStore(clients());
      const keys = Array.from({ length: 32 }, (_, index) => `spread-${index}`);
      await Promise.all(
        keys.map(async (key) => {
          const claimed = await store.claim(request({ key }));
          await store.complete(claimedToken(claimed), { kind: 'success', value: key }, 60_000);
          expect((await store.claim(request({ key }))).status).toBe('replay');
        }),
      );
      // MONITOR reports commands as Redis runs them: the marker comes after the calls'.
      await clients()[0]?.sendCommand(['ECHO', 'spread-done']);
      await until('MONITOR to report the marker', async () =>
        seen.some(({ command, key }) => command === 'ECHO' && key === 'spread-done'),
      );
      for (const key of keys) {
        const redisKey = recordKey(keyPrefix, request().scope, key);
        const ofKey = seen.filter((sent) => sent.key === redisKey);
        // The claim's SET and the PEXPIRETIME sent right behind it: on one connection, in
        // order (on two, Redis could read the expiry before the SET had written it).
        const set = ofKey.findIndex(({ command }) => command.toUpperCase() === 'SET');
        const expiry = ofKey.findIndex(
          ({ command }, index) => index > set && command.toUpperCase() === 'PEXPIRETIME',
        );
        expect(set, key).toBeGreaterThanOrEqual(0);
        expect(expiry, key).toBeGreaterThan(set);
        expect(ofKey[expiry]?.address, key).toBe(ofKey[set]?.address);
      }
      const used = new Set(
        seen.filter((sent) => sent.key.startsWith(keyPrefix)).map((sent) => sent.address),
      );
      expect([...used].sort()).toEqual([...addresses].sort());
    } finally {
      await monitor.close();
    }
  });

  it('keeps the clients it was given, whatever becomes of the array', async () => {
    const given = [...clients()];
    const { store } = freshStore(given);
    given.length = 0;
    expect((await store.claim(request({ key: 'kept' }))).status).toBe('claimed');
    // The sweep scans through one of the clients: the live record stays.
    expect(await store.sweep({ limit: 10 })).toBe(0);
    expect((await store.get(request().scope, 'kept'))?.status).toBe('in_progress');
  });

  it('passes over a connection that is not ready: calls go through the other at once', async () => {
    // A port that closes every connection it accepts: node-redis keeps reconnecting to it
    // (`isReady` false) and would hold every command sent to it until it got through.
    const closing = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => closing.listen(0, '127.0.0.1', resolve));
    const { port } = closing.address() as AddressInfo;
    const offline = createClient({
      socket: { host: '127.0.0.1', port, reconnectStrategy: 50 },
      commandOptions: { timeout: 60_000 },
    });
    offline.on('error', () => {});
    const connecting = offline.connect().catch(() => {});
    expect(offline.isReady).toBe(false);
    try {
      const [live] = clients();
      const { store } = freshStore([offline, live as NonNullable<typeof live>]);
      const keys = Array.from({ length: 8 }, (_, index) => `past-${index}`);
      const claims = await Promise.all(keys.map((key) => store.claim(request({ key }))));
      expect(claims.map(({ status }) => status)).toEqual(keys.map(() => 'claimed'));
      await Promise.all(
        claims.map((claimed) =>
          store.complete(claimedToken(claimed), { kind: 'success', value: 1 }, 60_000),
        ),
      );
      expect((await store.claim(request({ key: 'past-0' }))).status).toBe('replay');
    } finally {
      offline.destroy();
      await connecting;
      await new Promise((resolve) => closing.close(resolve));
    }
  });

  it('refuses an empty list, a value that is no client, and clients that reach other keys or act as another user', () => {
    const refusal = (connection: unknown) => {
      try {
        redisStore(connection as never);
      } catch (error) {
        return error;
      }
      return undefined;
    };
    const { url } = redis().server;
    const clusterLike = {
      evalSha: async () => 1,
      eval: async () => 1,
      masters: [],
      nodeClient: async () => clients()[0],
    };
    for (const [connection, message] of [
      [[], /empty array/],
      [undefined, /got undefined, which is not a node-redis client/],
      [[clients()[0], 'redis://localhost'], /got the string "redis:\/\/localhost" at index 1/],
      [
        [clients()[0], clusterLike],
        /differ in their kind: a one-node client at index 0, a cluster/,
      ],
      [[clients()[0], createClient({ url, database: 1 })], /database: 0 at index 0, 1 at index 1/],
      [[clients()[0], createClient({ url, keyPrefix: 'app:' })], /key prefix: "" at index 0/],
      [[clients()[0], createClient({ url, username: 'app' })], /user: "default" at index 0/],
    ] as const) {
      const refused = refusal(connection);
      expect(isConfigurationError(refused), String(refused)).toBe(true);
      expect(String(refused)).toMatch(message);
    }
    // Made with the same options: the same keys, as the same user.
    expect(refusal([clients()[0], createClient({ url })])).toBeUndefined();
  });
});
