import { claimRequest } from '@idem/core/testing/contract';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { newKeyClaim } from '../src/newKeyClaim.js';
import type { CommandSender } from '../src/RedisConnection.js';
import { ServerClockBound } from '../src/serverClock.js';

describe('ServerClockBound', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['performance', 'Date'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  /** A TIME that answers when the test says, with the server's clock at `serverMs`. */
  function timeServer() {
    const sent: Array<(serverMs: number) => void> = [];
    const send: CommandSender = (_what, _key, args) => {
      expect(args).toEqual(['TIME']);
      return new Promise((resolve) => {
        sent.push((serverMs) =>
          resolve([String(Math.floor(serverMs / 1000)), String((serverMs % 1000) * 1000)]),
        );
      });
    };
    return { send, sent };
  }

  it('bounds the server clock from above by the reading, the time since it was sent and the drift', async () => {
    const { send, sent } = timeServer();
    const clock = new ServerClockBound(send);
    expect(clock.read()).toBeUndefined(); // sends TIME, answers nothing yet
    expect(sent).toHaveLength(1);
    expect(clock.read()).toBeUndefined(); // one reading at a time
    expect(sent).toHaveLength(1);
    vi.advanceTimersByTime(4); // the server reads its clock somewhere in these 4 ms
    sent[0]?.(1_000_000);
    await Promise.resolve();
    vi.advanceTimersByTime(1_000);
    const bound = clock.read();
    // Sent 1,004 ms ago: at most 1,000,000 + 1,004 + 1 ms of drift (1,000 ppm), rounded up.
    expect(bound?.now).toBe(1_001_006);
    // Answered 1,000 ms ago: at least 1,000,000 + 1,000 - 1.004.
    expect(bound?.error).toBeCloseTo(1_001_006 - (1_001_000 - 1.004), 6);
    expect(sent).toHaveLength(1);
  });

  it('renews a reading older than 5 s in the background and drops one older than 30 s', async () => {
    const { send, sent } = timeServer();
    const clock = new ServerClockBound(send);
    clock.read();
    sent[0]?.(2_000_000);
    await Promise.resolve();
    vi.advanceTimersByTime(6_000);
    expect(clock.read()?.now).toBeGreaterThanOrEqual(2_006_000);
    expect(sent).toHaveLength(2); // renewing; the old reading still answers meanwhile
    vi.advanceTimersByTime(25_000);
    expect(clock.read()).toBeUndefined(); // 31 s old, and the renewal never answered
    sent[1]?.(2_031_000);
    await Promise.resolve();
    // Sent 25 s before its answer: the server may have read its clock right after the send.
    expect(clock.read()).toEqual({ now: 2_056_025, error: 25_050 });
  });

  it('stays without a bound when TIME fails, and asks again on the next read', async () => {
    let calls = 0;
    const clock = new ServerClockBound(async () => {
      calls += 1;
      throw new Error('ECONNREFUSED');
    });
    expect(clock.read()).toBeUndefined();
    await Promise.resolve();
    await Promise.resolve();
    expect(clock.read()).toBeUndefined();
    expect(calls).toBe(2);
  });
});

describe('newKeyClaim', () => {
  const now = { now: 5_000_000, error: 2 };

  it('sends SET NX PX GET with the lifetime and the error, and claims when Redis set it', async () => {
    const sent: string[][] = [];
    const claim = newKeyClaim(
      async (_what, _key, args) => {
        sent.push(args);
        return null;
      },
      () => now,
      true,
    );
    const result = await claim(claimRequest({ leaseMs: 30_000, ttlMs: 60_000 }), 'k');
    expect(sent).toEqual([
      [
        'SET',
        'k',
        `in_progress 1 5000000 5030000 5060000 1 -\n${JSON.stringify('fp-a')}\n\n`,
        'NX',
        'PX',
        '60002',
        'GET',
      ],
    ]);
    expect(result).toMatchObject({
      status: 'claimed',
      takeover: false,
      record: { version: 1, createdAt: 5_000_000, lockedUntil: 5_030_000, expiresAt: 5_060_000 },
    });
  });

  it('leaves to the script what it cannot stamp or read safely, and stops after a syntax error', async () => {
    let calls = 0;
    let reply: () => Promise<unknown> = async () => null;
    const claim = newKeyClaim(
      () => {
        calls += 1;
        return reply();
      },
      () => now,
      true,
    );
    // Too short a life for the clock's error, or a fraction of a millisecond: no command.
    expect(claim(claimRequest({ leaseMs: 500, ttlMs: 1_000 }), 'k')).toBeUndefined();
    expect(claim(claimRequest({ leaseMs: 30_000.5 }), 'k')).toBeUndefined();
    expect(calls).toBe(0);
    // A record in progress, or one past its end: the script decides.
    reply = async () => `in_progress 1 1 9999999999 9999999999 1 -\n"fp-a"\n\n`;
    expect(await claim(claimRequest(), 'k')).toBeUndefined();
    reply = async () => `completed 1 1 - 4999999 1 2\n"fp-a"\n{"kind":"success","value":1}\n`;
    expect(await claim(claimRequest(), 'k')).toBeUndefined();
    // A hash record of an earlier version.
    reply = () => Promise.reject(new Error('WRONGTYPE Operation against a key'));
    expect(await claim(claimRequest(), 'k')).toBeUndefined();
    // A Redis before 7.0 refuses NX with GET: never asked again.
    reply = () => Promise.reject(new Error('ERR syntax error'));
    expect(await claim(claimRequest(), 'k')).toBeUndefined();
    const asked = calls;
    expect(claim(claimRequest(), 'k')).toBeUndefined();
    expect(calls).toBe(asked);
  });

  it('answers replay and mismatch from a completed record, and passes on other failures', async () => {
    let reply: () => Promise<unknown> = async () =>
      `completed 1 1 - 9999999 1 2\n"fp-a"\n{"kind":"success","value":1}\n`;
    const claim = newKeyClaim(
      () => reply(),
      () => now,
      true,
    );
    expect(await claim(claimRequest(), 'k')).toMatchObject({
      status: 'replay',
      record: { outcome: { kind: 'success', value: 1 } },
    });
    expect(await claim(claimRequest({ fingerprint: 'fp-b' }), 'k')).toMatchObject({
      status: 'mismatch',
    });
    reply = () =>
      Promise.reject(new Error('READONLY You cannot write against a read only replica.'));
    await expect(claim(claimRequest(), 'k')).rejects.toThrow(/READONLY/);
  });
});
