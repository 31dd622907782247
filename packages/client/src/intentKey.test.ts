// @vitest-environment happy-dom
import { isConfigurationError } from '@idem/core';
import { manualClock } from '@idem/core/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { INTENT_KEY_PREFIX, type IntentStorage, intentKey } from './intentKey.js';

afterEach(() => {
  localStorage.clear();
  sessionStorage.clear();
});

/** A Storage of our own, to see exactly what is written. */
function fakeStorage(): IntentStorage & { entries: Map<string, string> } {
  const entries = new Map<string, string>();
  return {
    entries,
    getItem: (name) => entries.get(name) ?? null,
    setItem: (name, value) => void entries.set(name, value),
    removeItem: (name) => void entries.delete(name),
    key: (index) => [...entries.keys()][index] ?? null,
    get length() {
      return entries.size;
    },
  };
}

describe('intentKey', () => {
  it('keeps one key per intent across instances (a reload, Back, a second tab)', () => {
    const first = intentKey({ intent: 'cart:42' }).get();
    expect(first).toMatch(/^[0-9a-f-]{36}$/);
    expect(intentKey({ intent: 'cart:42' }).get()).toBe(first);
    expect(intentKey({ intent: 'cart:42' }).peek()).toBe(first);
    expect(localStorage.getItem(`${INTENT_KEY_PREFIX}cart:42`)).toContain(first);
  });

  it('gives another intent another key', () => {
    const cart = intentKey({ intent: 'cart:42:v1' }).get();
    const changedCart = intentKey({ intent: 'cart:42:v2' }).get();
    expect(changedCart).not.toBe(cart);
    expect(intentKey({ intent: 'cart:42:v1' }).get()).toBe(cart);
  });

  it('forgets the key when the intent settles', () => {
    const intent = intentKey({ intent: 'invoice:7' });
    const first = intent.get();
    intent.settle();
    expect(intent.peek()).toBeUndefined();
    expect(localStorage.getItem(`${INTENT_KEY_PREFIX}invoice:7`)).toBeNull();
    const next = intent.get();
    expect(next).not.toBe(first);
  });

  it("'session' keeps the key in sessionStorage, apart from localStorage", () => {
    const tab = intentKey({ intent: 'cart:1', storage: 'session' }).get();
    expect(sessionStorage.getItem(`${INTENT_KEY_PREFIX}cart:1`)).toContain(tab);
    expect(localStorage.getItem(`${INTENT_KEY_PREFIX}cart:1`)).toBeNull();
    expect(intentKey({ intent: 'cart:1', storage: 'local' }).get()).not.toBe(tab);
  });

  it('expires after ttlMs and then removes expired entries of other intents', () => {
    const clock = manualClock(1_000_000);
    const storage = fakeStorage();
    const old = intentKey({ intent: 'a', storage, ttlMs: 60_000, clock });
    const other = intentKey({ intent: 'b', storage, ttlMs: 60_000, clock });
    const first = old.get();
    other.get();
    clock.advance(59_999);
    expect(old.get()).toBe(first);
    clock.advance(1);
    expect(old.peek()).toBeUndefined();
    const renewed = old.get();
    expect(renewed).not.toBe(first);
    // Writing the new entry removed b's expired one: nothing piles up.
    expect([...storage.entries.keys()]).toEqual([`${INTENT_KEY_PREFIX}a`]);
  });

  it('treats a corrupt entry as no key', () => {
    localStorage.setItem(`${INTENT_KEY_PREFIX}x`, '{not json');
    const key = intentKey({ intent: 'x' }).get();
    expect(key).toMatch(/^[0-9a-f-]{36}$/);
    expect(intentKey({ intent: 'x' }).get()).toBe(key);
  });

  it('keeps the key for this page when the storage refuses to write', () => {
    const storage: IntentStorage = {
      getItem: () => null,
      setItem: () => {
        throw new DOMException('quota', 'QuotaExceededError');
      },
      removeItem: () => {},
    };
    const intent = intentKey({ intent: 'full', storage });
    const key = intent.get();
    expect(key).toMatch(/^[0-9a-f-]{36}$/);
    // A second click on Pay must send the same key, or the server runs the payment twice.
    expect(intent.peek()).toBe(key);
    expect(intent.get()).toBe(key);
    expect(intentKey({ intent: 'full', storage }).get()).toBe(key);
    intent.settle();
    expect(intent.peek()).toBeUndefined();
    expect(intent.get()).not.toBe(key);
  });

  it('keeps the key for this page when localStorage is full (QuotaExceededError)', () => {
    const full = vi.spyOn(localStorage, 'setItem').mockImplementation(() => {
      throw new DOMException('The quota has been exceeded.', 'QuotaExceededError');
    });
    try {
      const key = intentKey({ intent: 'cart:full' }).get();
      expect(full).toHaveBeenCalled();
      expect(localStorage.getItem(`${INTENT_KEY_PREFIX}cart:full`)).toBeNull();
      expect(intentKey({ intent: 'cart:full' }).peek()).toBe(key);
      expect(intentKey({ intent: 'cart:full' }).get()).toBe(key);
    } finally {
      full.mockRestore();
      intentKey({ intent: 'cart:full' }).settle();
    }
  });

  it('treats a storage that refuses to read as holding no key', () => {
    const storage: IntentStorage = {
      getItem: () => {
        throw new DOMException('denied', 'SecurityError');
      },
      setItem: () => {
        throw new DOMException('denied', 'SecurityError');
      },
      removeItem: () => {
        throw new DOMException('denied', 'SecurityError');
      },
    };
    const intent = intentKey({ intent: 'denied', storage });
    const key = intent.get();
    expect(intent.get()).toBe(key);
    intent.settle();
    expect(intent.peek()).toBeUndefined();
  });

  it('tells subscribers about settle() in this tab and changes made in another tab', async () => {
    const intent = intentKey({ intent: 'cart:9' });
    const seen: string[] = [];
    const unsubscribe = intent.subscribe(() => seen.push(intent.peek() ?? 'none'));
    const key = intentKey({ intent: 'cart:9' }).get();
    // A new key is announced after the current task (get() may run during a render).
    expect(seen).toEqual([]);
    await Promise.resolve();
    expect(seen).toEqual([key]);
    intentKey({ intent: 'cart:9' }).settle();
    expect(seen).toEqual([key, 'none']);

    // Another tab stored a key: the browser fires `storage` here.
    localStorage.setItem(
      `${INTENT_KEY_PREFIX}cart:9`,
      JSON.stringify({ key: 'from-the-other-tab', expiresAt: Date.now() + 60_000 }),
    );
    window.dispatchEvent(new StorageEvent('storage', { key: `${INTENT_KEY_PREFIX}cart:9` }));
    window.dispatchEvent(new StorageEvent('storage', { key: 'unrelated' }));
    expect(seen).toEqual([key, 'none', 'from-the-other-tab']);

    unsubscribe();
    intentKey({ intent: 'cart:9' }).settle();
    expect(seen).toHaveLength(3);
  });

  it('refuses bad options with a ConfigurationError that says what to pass', () => {
    const refused = (make: () => unknown) => {
      try {
        make();
      } catch (error) {
        expect(isConfigurationError(error)).toBe(true);
        return (error as Error).message;
      }
      throw new Error('accepted');
    };
    expect(refused(() => intentKey({ intent: '' }))).toMatch(/`intent` must be a string of 1–200/);
    expect(refused(() => intentKey({ intent: 'x'.repeat(201) }))).toMatch(/201 characters/);
    expect(refused(() => intentKey({ intent: 'x', ttlMs: 0 }))).toMatch(
      /`ttlMs` must be a positive number/,
    );
    expect(
      refused(() => intentKey({ intent: 'x', storage: 'cookies' as unknown as 'local' })),
    ).toMatch(/`storage` must be 'local', 'session'/);
  });
});
