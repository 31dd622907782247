import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CommandBound } from '../src/commandBound.js';

describe('CommandBound', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const never = () => new Promise<never>(() => {});

  it('fails a call that is not answered within the timeout, naming what was sent and the key', async () => {
    const bound = new CommandBound(1_000);
    const call = bound.run('claim script', 'idem:{1:s:k}', never);
    const settled = vi.fn();
    call.catch(settled);
    await vi.advanceTimersByTimeAsync(999);
    expect(settled).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    await expect(call).rejects.toThrow(
      'redisStore: Redis did not answer the claim script on idem:{1:s:k} within 1000 ms',
    );
    await expect(call).rejects.toMatchObject({ name: 'TimeoutError' });
  });

  it('answers settled calls as they are and keeps bounding the ones still waiting', async () => {
    const bound = new CommandBound(1_000);
    expect(await bound.run('read script', 'a', async () => 'first')).toBe('first');
    await expect(
      bound.run('read script', 'b', async () => {
        throw new Error('WRONGTYPE');
      }),
    ).rejects.toThrow('WRONGTYPE');
    await vi.advanceTimersByTimeAsync(600);
    // Sent 600 ms after the timer was armed: its deadline comes after the first check.
    const late = bound.run('complete script', 'c', never);
    late.catch(() => {});
    let answer: (value: string) => void = () => {};
    const answered = bound.run(
      'read script',
      'd',
      () => new Promise<string>((resolve) => (answer = resolve)),
    );
    await vi.advanceTimersByTimeAsync(500);
    answer('in time');
    expect(await answered).toBe('in time');
    await vi.advanceTimersByTimeAsync(499);
    await expect(Promise.race([late, 'pending'])).resolves.toBe('pending');
    await vi.advanceTimersByTimeAsync(1);
    await expect(late).rejects.toThrow('the complete script on c within 1000 ms');
  });
});
