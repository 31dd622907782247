/**
 * The one table printer: every scenario reports rows of this shape, and the run prints
 * them together, so every ratio in the table was measured in the same run.
 */

export type Verdict = 'met' | 'missed' | 'ok' | 'FAILED' | 'info';

export interface ResultRow {
  scenario: string;
  variant: string;
  /** The headline number with its unit, e.g. "4,210 req/s". */
  result: string;
  p50?: string;
  p99?: string;
  /** Against the scenario's baseline, e.g. "0.91×". */
  ratio?: string;
  target?: string;
  verdict?: Verdict;
  /** A short remark, printed as the last column. */
  note?: string;
}

/** The columns in order, each headed by its field's name, and the side its cells align to. */
const COLUMNS = [
  ['scenario', 'left'],
  ['variant', 'left'],
  ['result', 'right'],
  ['p50', 'right'],
  ['p99', 'right'],
  ['ratio', 'right'],
  ['target', 'left'],
  ['verdict', 'left'],
  ['note', 'left'],
] as const satisfies readonly (readonly [keyof ResultRow, 'left' | 'right'])[];

/**
 * Renders rows as a fixed-width text table (also valid Markdown when `markdown` is set).
 * A scenario name is printed only on its first row, so groups read as blocks.
 */
export function formatTable(
  rows: readonly ResultRow[],
  options: { markdown?: boolean } = {},
): string {
  const used = COLUMNS.filter(
    ([field], index) => index < 3 || rows.some((row) => (row[field] ?? '') !== ''),
  );
  const cells = rows.map((row, index) =>
    used.map(([field]) => {
      if (
        field === 'scenario' &&
        !options.markdown &&
        index > 0 &&
        rows[index - 1]?.scenario === row.scenario
      ) {
        return '';
      }
      return String(row[field] ?? '');
    }),
  );
  const headers = used.map(([field]) => field);
  // Every line has a cell in every column: `?? ''` reads in range.
  const columns = used.map(([field, align], column) => {
    const size = Math.max(field.length, ...cells.map((line) => width(line[column] ?? '')));
    const pad = (text: string) => {
      const fill = ' '.repeat(size - width(text));
      return align === 'right' ? fill + text : text + fill;
    };
    return { size, align, pad };
  });
  const padded = (values: readonly string[]) =>
    columns.map(({ pad }, column) => pad(values[column] ?? ''));
  if (options.markdown) {
    const line = (values: readonly string[]) => `| ${padded(values).join(' | ')} |`;
    const rule = `|${columns.map(({ size, align }) => (align === 'right' ? `${'-'.repeat(size + 1)}:` : `${'-'.repeat(size + 2)}`)).join('|')}|`;
    return [line(headers), rule, ...cells.map(line)].join('\n');
  }
  const line = (values: readonly string[]) => padded(values).join('  ').trimEnd();
  return [
    line(headers),
    columns.map(({ size }) => '─'.repeat(size)).join('  '),
    ...cells.map(line),
  ].join('\n');
}

/** Display width: code points, so "×" and "≥" count as one column. */
function width(text: string): number {
  return [...text].length;
}

const grouped = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

/** 12345.6 → "12,346"; NaN → "n/a". */
export function formatCount(value: number): string {
  return Number.isFinite(value) ? grouped.format(value) : 'n/a';
}

/** A rate with its unit: "12,346 req/s". */
export function formatRate(value: number, unit: string): string {
  return `${formatCount(value)} ${unit}`;
}

/** Milliseconds with sensible precision: 0.42 ms, 4.2 ms, 42 ms, 4,200 ms. */
export function formatMs(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  if (value < 1) return `${value.toFixed(2)} ms`;
  if (value < 10) return `${value.toFixed(1)} ms`;
  return `${formatCount(value)} ms`;
}

/** A ratio: "0.87×". */
export function formatRatio(value: number): string {
  return Number.isFinite(value) ? `${value.toFixed(2)}×` : 'n/a';
}

/** Bytes as MiB: "84.2 MiB". */
export function formatMiB(bytes: number): string {
  return Number.isFinite(bytes) ? `${(bytes / 1024 / 1024).toFixed(1)} MiB` : 'n/a';
}

/** "met" when `actual ≥ minimum` (or ≤ maximum), else "missed". */
export function verdictAtLeast(actual: number, minimum: number): Verdict {
  return actual >= minimum ? 'met' : 'missed';
}

export function verdictAtMost(actual: number, maximum: number): Verdict {
  return actual <= maximum ? 'met' : 'missed';
}
