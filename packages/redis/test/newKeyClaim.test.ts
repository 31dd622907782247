import { manualClock } from '@idem/core/testing';
import { claimRequest } from '@idem/core/testing/contract';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { newKeyClaim } from '../src/newKeyClaim.js';
import type { CommandSender } from '../src/RedisConnection.js';

const SECOND = 1_700_000_000;
/** The server's clock in these tests: TIME answers it, PEXPIRETIME counts from it. */
const NOW = SECOND * 1000 + 250;
const completed = (expiresAt: number, fingerprint = 'fp-a') =>
  `completed 1 1 - ${expiresAt} 1 2\n"${fingerprint}"\n{"kind":"success","value":1}\n`;

/** A Redis that answers each command by `answer`, and the commands it was sent. */
function fakeRedis(answer: (args: string[]) => Promise<unknown>) {
  const sent: string[][] = [];
  const command: CommandSender = (_what, _key, args) => {
    sent.push(args);
    return answer(args);
  };
  return { sent, command };
}

/**
 * The answers of a Redis where the key is `holds` (a record's text, its expiry at
 * `expiresAt`), or absent (then the SET at NOW sets it to expire at NOW + its PX).
 */
const redisWith =
  (holds: string | null, expiresAt = NOW + 59_999) =>
  async (args: string[]): Promise<unknown> => {
    if (args[0] === 'SET') return holds;
    if (args[0] === 'PEXPIRETIME') return expiresAt;
    throw new Error(`unexpected ${args[0]}`);
  };

const ready = () => true;

describe('newKeyClaim on the server clock', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('sends SET NX PX GET with times relative to the expiry and PEXPIRETIME, and claims at the SET', async () => {
    const { sent, command } = fakeRedis(redisWith(null));
    const claim = newKeyClaim(command, undefined, ready);
    const result = await claim(claimRequest({ leaseMs: 30_000, ttlMs: 60_000 }), 'k');
    expect(sent).toEqual([
      ['PEXPIRETIME', 'k'], // once, before the store's first plain SET
      [
        'SET',
        'k',
        `in_progress 1 @59999+30000+60000 1 -\n${JSON.stringify('fp-a')}\n\n`,
        'NX',
        'PX',
        '59999',
        'GET',
      ],
      ['PEXPIRETIME', 'k'],
    ]);
    // PEXPIRETIME answered NOW + 59,999: the SET ran at NOW.
    expect(result).toMatchObject({
      status: 'claimed',
      takeover: false,
      record: {
        version: 1,
        attempts: 1,
        createdAt: NOW,
        lockedUntil: NOW + 30_000,
        expiresAt: NOW + 60_000,
      },
    });
  });

  it('answers replay and mismatch from a completed record that ends after its key expires, and leaves the rest to the script', async () => {
    // The key expires at NOW: Redis ran the SET at NOW or before.
    const claimOn = (holds: string | null | Error) =>
      newKeyClaim(
        fakeRedis(async (args) => {
          if (holds instanceof Error && args[0] === 'SET') throw holds;
          return redisWith(holds instanceof Error ? null : holds, NOW)(args);
        }).command,
        undefined,
        ready,
      );
    expect(await claimOn(completed(NOW + 1))(claimRequest(), 'k')).toMatchObject({
      status: 'replay',
      record: { outcome: { kind: 'success', value: 1 } },
    });
    expect(
      await claimOn(completed(NOW + 1))(claimRequest({ fingerprint: 'fp-b' }), 'k'),
    ).toMatchObject({ status: 'mismatch' });
    // May have ended by the server's now; in progress; not a record; a hash record of 0.1.
    for (const holds of [
      completed(NOW),
      `in_progress 1 1 9999999999999 9999999999999 1 -\n"fp-a"\n\n`,
      'completed but not a record',
      new Error('WRONGTYPE Operation against a key holding the wrong kind of value'),
    ]) {
      expect(await claimOn(holds)(claimRequest(), 'k')).toBeUndefined();
    }
    await expect(
      claimOn(new Error('READONLY You cannot write against a read only replica.'))(
        claimRequest(),
        'k',
      ),
    ).rejects.toThrow(/READONLY/);
  });

  it('leaves a new record whose answers took as long as it lives, or whose expiry it cannot read, to its lease and the script', async () => {
    vi.useFakeTimers({ toFake: ['performance'] });
    const late = newKeyClaim(
      fakeRedis(async (args) => {
        if (args[0] === 'PEXPIRETIME') vi.advanceTimersByTime(2_000);
        return redisWith(null)(args);
      }).command,
      undefined,
      ready,
    );
    expect(await late(claimRequest({ leaseMs: 1_000, ttlMs: 2_000 }), 'k')).toBeUndefined();
    for (const expiry of [-2, -1]) {
      const gone = newKeyClaim(fakeRedis(redisWith(null, expiry)).command, undefined, ready);
      expect(await gone(claimRequest(), 'k')).toBeUndefined();
    }
    const lost = newKeyClaim(
      fakeRedis(async (args) => {
        if (args[0] === 'PEXPIRETIME') throw new Error('Socket closed unexpectedly');
        return redisWith(null)(args);
      }).command,
      undefined,
      ready,
    );
    await expect(lost(claimRequest(), 'k')).rejects.toThrow(/Socket closed/);
    // An ACL that refuses PEXPIRETIME: nothing is written, this claim goes to the script, and
    // so does every later one.
    const sent: string[][] = [];
    const refused = newKeyClaim(
      fakeRedis(async (args) => {
        sent.push(args);
        if (args[0] === 'PEXPIRETIME') {
          throw new Error("NOPERM User app has no permissions to run the 'pexpiretime' command");
        }
        return redisWith(null)(args);
      }).command,
      undefined,
      ready,
    );
    // Two claims asked for together: the second waits for the same answer, and sends no SET.
    const together = [refused(claimRequest(), 'k'), refused(claimRequest(), 'k2')];
    expect(await Promise.all(together)).toEqual([undefined, undefined]);
    expect(refused(claimRequest(), 'k')).toBeUndefined();
    expect(sent).toEqual([['PEXPIRETIME', 'k']]);
  });

  it('sends nothing for a fraction of a millisecond or a client that is not connected, and stops after a syntax error', async () => {
    let reply: (args: string[]) => Promise<unknown> = redisWith(null);
    const { sent, command } = fakeRedis((args) => reply(args));
    let connected = false;
    const claim = newKeyClaim(command, undefined, () => connected);
    expect(claim(claimRequest(), 'k')).toBeUndefined();
    connected = true;
    expect(claim(claimRequest({ leaseMs: 30_000.5 }), 'k')).toBeUndefined();
    expect(claim(claimRequest({ leaseMs: 1, ttlMs: 1 }), 'k')).toBeUndefined();
    expect(sent).toHaveLength(0);
    // Redis before 7.0 refuses NX with GET: never asked again.
    reply = async (args) => {
      if (args[0] === 'SET') throw new Error('ERR syntax error');
      return redisWith(null)(args);
    };
    expect(claim.active).toBe(true);
    expect(await claim(claimRequest(), 'k')).toBeUndefined();
    const asked = sent.length;
    expect(claim(claimRequest(), 'k')).toBeUndefined();
    expect(sent).toHaveLength(asked);
    expect(claim.active).toBe(false);
  });
});

describe('newKeyClaim on an injected clock', () => {
  it("stamps the record with the clock's now in one SET NX GET, and judges a record by it", async () => {
    const clock = manualClock(NOW);
    let holds: string | null = null;
    const { sent, command } = fakeRedis(async () => holds);
    const claim = newKeyClaim(command, clock, ready);
    expect(await claim(claimRequest({ leaseMs: 30_000, ttlMs: 60_000 }), 'k')).toMatchObject({
      status: 'claimed',
      record: { createdAt: NOW, lockedUntil: NOW + 30_000, expiresAt: NOW + 60_000 },
    });
    expect(sent).toEqual([
      [
        'SET',
        'k',
        `in_progress 1 ${NOW} ${NOW + 30_000} ${NOW + 60_000} 1 -\n"fp-a"\n\n`,
        'NX',
        'GET',
      ],
    ]);
    holds = completed(NOW + 10);
    expect((await claim(claimRequest(), 'k'))?.status).toBe('replay');
    clock.advance(10);
    expect(await claim(claimRequest(), 'k')).toBeUndefined(); // expired: the script resets it
  });
});
