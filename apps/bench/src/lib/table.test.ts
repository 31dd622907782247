import { describe, expect, it } from 'vitest';
import {
  formatCount,
  formatMiB,
  formatMs,
  formatRatio,
  formatTable,
  verdictAtLeast,
  verdictAtMost,
} from './table.js';

describe('formatTable', () => {
  const rows = [
    { scenario: 'HTTP', variant: 'plain', result: '4,000 req/s', ratio: '1.00×' },
    {
      scenario: 'HTTP',
      variant: 'lease',
      result: '3,000 req/s',
      ratio: '0.75×',
      target: '≥ 0.65×',
      verdict: 'met' as const,
    },
    { scenario: 'storm', variant: 'tx', result: '1 execution' },
  ];

  it('aligns columns, right-aligns numbers, and prints a scenario once per block', () => {
    expect(formatTable(rows)).toBe(
      [
        'scenario  variant       result  ratio  target   verdict',
        '────────  ───────  ───────────  ─────  ───────  ───────',
        'HTTP      plain    4,000 req/s  1.00×',
        '          lease    3,000 req/s  0.75×  ≥ 0.65×  met',
        'storm     tx       1 execution',
      ].join('\n'),
    );
  });

  it('leaves out optional columns that no row fills', () => {
    const [header] = formatTable(rows).split('\n');
    expect(header).not.toContain('p50');
    expect(header).not.toContain('note');
  });

  it('renders Markdown with every scenario name and alignment markers', () => {
    const markdown = formatTable(rows, { markdown: true }).split('\n');
    expect(markdown[0]).toBe('| scenario | variant |      result | ratio | target  | verdict |');
    expect(markdown[1]).toBe('|----------|---------|------------:|------:|---------|---------|');
    expect(markdown[3]).toBe('| HTTP     | lease   | 3,000 req/s | 0.75× | ≥ 0.65× | met     |');
  });
});

describe('number formats', () => {
  it('groups counts and marks missing values', () => {
    expect(formatCount(12345.6)).toBe('12,346');
    expect(formatCount(Number.NaN)).toBe('n/a');
  });

  it('scales the precision of milliseconds', () => {
    expect(formatMs(0.423)).toBe('0.42 ms');
    expect(formatMs(4.26)).toBe('4.3 ms');
    expect(formatMs(4200)).toBe('4,200 ms');
  });

  it('prints ratios and MiB', () => {
    expect(formatRatio(0.8666)).toBe('0.87×');
    expect(formatMiB(1024 * 1024 * 84.24)).toBe('84.2 MiB');
  });

  it('judges targets inclusively', () => {
    expect(verdictAtLeast(0.85, 0.85)).toBe('met');
    expect(verdictAtLeast(0.849, 0.85)).toBe('missed');
    expect(verdictAtMost(2, 2)).toBe('met');
    expect(verdictAtMost(2.01, 2)).toBe('missed');
  });
});
