import { describe, expect, it } from 'vitest';
import { notifyObserver } from './notifyObserver.js';

describe('notifyObserver', () => {
  it('hands the event to the observer', () => {
    const seen: number[] = [];
    notifyObserver((event: number) => seen.push(event), 7);
    expect(seen).toEqual([7]);
  });

  it('swallows what the observer throws, and does nothing without one', () => {
    expect(() =>
      notifyObserver(() => {
        throw new Error('broken dashboard');
      }, 1),
    ).not.toThrow();
    expect(() => notifyObserver(undefined, 1)).not.toThrow();
  });
});
