import { describe, expect, it } from 'vitest';
import * as main from './index.js';
import * as store from './store/index.js';
import * as testing from './testing/index.js';

describe('package entries', () => {
  it('export each name from one entry', () => {
    const names = [main, store, testing].flatMap((entry) => Object.keys(entry));
    expect(names.filter((name, index) => names.indexOf(name) !== index)).toEqual([]);
  });

  it('keep store-author and testing helpers out of the main entry', () => {
    expect(Object.keys(main)).not.toContain('memoryStore');
    expect(Object.keys(main)).not.toContain('decideClaim');
    expect(typeof store.decideClaim).toBe('function');
    expect(typeof testing.memoryStore).toBe('function');
    expect(typeof main.createIdempotency).toBe('function');
  });
});
