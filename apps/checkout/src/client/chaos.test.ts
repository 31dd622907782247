import { describe, expect, it } from 'vitest';
import { chaosFromSearch, chaosToSearch, NO_CHAOS, searchWithChaos } from './chaos';

describe('chaos settings in the query string', () => {
  it('reads every switch, clamped to its range', () => {
    expect(
      chaosFromSearch('?drop=50&fail=150&latency=300&crash=1&double=true&redeliver=on&seed=4'),
    ).toEqual({
      dropRepliesPercent: 50,
      failBeforeSendPercent: 100,
      latencyMs: 300,
      crashAfterCharge: true,
      doubleClick: true,
      redeliverEvent: true,
      seed: 4,
    });
  });

  it('falls back to no chaos for missing or garbage values', () => {
    expect(chaosFromSearch('?drop=lots&crash=maybe')).toEqual(NO_CHAOS);
  });

  it('round-trips through chaosToSearch, leaving defaults out', () => {
    const chaos = { ...NO_CHAOS, dropRepliesPercent: 30, crashAfterCharge: true };
    expect(chaosToSearch(chaos)).toBe('?drop=30&crash=1');
    expect(chaosFromSearch(chaosToSearch(chaos))).toEqual(chaos);
    expect(chaosToSearch(NO_CHAOS)).toBe('');
  });

  it('replaces the chaos in a query string and keeps the other parameters', () => {
    const chaos = { ...NO_CHAOS, latencyMs: 1500 };
    expect(searchWithChaos('?checkout=co_1&drop=50&crash=1', chaos)).toBe(
      '?checkout=co_1&latency=1500',
    );
    expect(searchWithChaos('?drop=50', NO_CHAOS)).toBe('');
  });
});
