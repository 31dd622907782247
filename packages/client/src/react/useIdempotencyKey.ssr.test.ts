// @vitest-environment node
import { createElement } from 'react';
import { renderToString } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import { useIdempotencyKey } from './useIdempotencyKey.js';

function Pay() {
  const { key } = useIdempotencyKey({ intent: 'cart:1' });
  return createElement(
    'button',
    { type: 'button', disabled: key === undefined },
    key ?? 'no key yet',
  );
}

describe('useIdempotencyKey({ intent }) on the server', () => {
  it('renders without Web Storage: no key until the browser has one', () => {
    expect(typeof window).toBe('undefined');
    expect(renderToString(createElement(Pay))).toBe(
      '<button type="button" disabled="">no key yet</button>',
    );
  });
});
