import { UnserializableValueError } from './errors/UnserializableValueError.js';
import { MAX_NESTING } from './serializer.js';

/**
 * A JSON number whose literal a double cannot hold exactly (`9007199254740993`, `0.1000000000000000000001`,
 * `1e400`). It fingerprints as `{"$number":"<canonical decimal>"}`, so two literals that a
 * bigint- or decimal-aware parser tells apart never share a fingerprint.
 */
export class ExactNumber {
  constructor(readonly canonical: string) {}

  toJSON(): { $number: string } {
    return { $number: this.canonical };
  }
}

/**
 * A candidate for a literal that may not survive `JSON.parse`: a run of 16 number
 * characters, or a digit followed by an exponent. Text without one (most bodies) holds only
 * literals of at most 15 characters and no exponent, which a double holds exactly: at most
 * 15 significant digits round-trip through a double.
 */
const MAYBE_INEXACT = /[0-9.eE+-]{16}|[0-9][eE]/;

/**
 * The value a JSON text is fingerprinted as: `parsed` (what `JSON.parse(text)` returned)
 * when every number literal in `text` is exactly the double it parses to, as nearly every
 * text is; otherwise the text parsed again with each other number kept as its literal's
 * canonical decimal. So `{"amount":9007199254740993}` and `{"amount":9007199254740992}`,
 * one double apart for `JSON.parse`, get two fingerprints, while `1`, `1.0` and `10e-1`
 * (one number however it is written) get one. `text` must be valid JSON.
 */
export function exactJson(text: string, parsed: unknown): unknown {
  if (!MAYBE_INEXACT.test(text) || !hasInexactNumber(text)) return parsed;
  return new ExactParser(text).value();
}

/** Whether a number literal outside the strings of (valid JSON) `text` is not a double exactly. */
function hasInexactNumber(text: string): boolean {
  for (let index = 0; index < text.length; ) {
    const char = text.charCodeAt(index);
    if (char === QUOTE) {
      index = stringEnd(text, index);
    } else if (char === MINUS || (char >= DIGIT_0 && char <= DIGIT_9)) {
      const end = numberEnd(text, index);
      if (inexact(text.slice(index, end))) return true;
      index = end;
    } else {
      index++;
    }
  }
  return false;
}

/** The canonical decimal of a number literal, or `undefined` when a double holds it exactly. */
function inexact(literal: string): string | undefined {
  if (literal.length <= 15 && !/[eE]/.test(literal)) return undefined;
  const canonical = canonicalDecimal(literal);
  const double = Number(literal);
  if (Number.isFinite(double) && canonicalDecimal(String(double)) === canonical) return undefined;
  return canonical;
}

/**
 * A decimal literal (JSON's number grammar, or `String(number)`'s `1e+21`) as
 * `<sign><digits>e<exponent>`: the value is digits × 10^exponent, the digits have no leading
 * or trailing zeros, and zero is `0e0` whatever its sign. Equal values, equal texts.
 */
export function canonicalDecimal(literal: string): string {
  const match = /^(-?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(literal);
  if (!match) throw new TypeError(`not a decimal literal: ${literal.slice(0, 40)}`);
  const [, sign, whole = '', fraction = '', exponentText = '0'] = match;
  let digits = `${whole}${fraction}`.replace(/^0+/, '');
  // A loop, not /0+$/: that regex tries each run of zeros to its end, which makes a
  // hostile literal of many zeros and a last nonzero digit quadratic.
  let end = digits.length;
  while (end > 0 && digits.charCodeAt(end - 1) === DIGIT_0) end--;
  const trailing = digits.length - end;
  digits = digits.slice(0, end);
  if (digits.length === 0) return '0e0';
  const exponent = addSmall(exponentText, trailing - fraction.length);
  return `${sign}${digits}e${exponent}`;
}

/**
 * `decimal + shift` as a decimal integer text, exactly: `decimal` is a JSON exponent (any
 * number of digits), `shift` at most the length of a body. Number arithmetic is exact up to
 * 15 digits; a longer exponent is added to digit by digit, without BigInt, whose parsing of
 * a hostile million-digit exponent would take seconds.
 */
function addSmall(decimal: string, shift: number): string {
  const negative = decimal.startsWith('-');
  const magnitude = decimal.replace(/^[+-]/, '').replace(/^0+(?=\d)/, '');
  if (magnitude.length <= 15) return String((negative ? -1 : 1) * Number(magnitude) + shift);
  // |decimal| >= 10^15 > |shift|: the sign is the exponent's, the magnitude moves by |shift|.
  const grows = negative === shift < 0;
  const moved = grows
    ? addDigits(magnitude, Math.abs(shift))
    : subtractDigits(magnitude, Math.abs(shift));
  return `${negative ? '-' : ''}${moved}`;
}

function addDigits(digits: string, amount: number): string {
  const out = digits.split('');
  let carry = amount;
  for (let index = out.length - 1; index >= 0 && carry > 0; index--) {
    const sum = Number(out[index]) + (carry % 10);
    carry = Math.floor(carry / 10) + (sum >= 10 ? 1 : 0);
    out[index] = String(sum % 10);
  }
  return `${carry > 0 ? carry : ''}${out.join('')}`;
}

function subtractDigits(digits: string, amount: number): string {
  const out = digits.split('');
  let borrow = amount;
  for (let index = out.length - 1; index >= 0 && borrow > 0; index--) {
    let difference = Number(out[index]) - (borrow % 10);
    borrow = Math.floor(borrow / 10);
    if (difference < 0) {
      difference += 10;
      borrow++;
    }
    out[index] = String(difference);
  }
  return out.join('').replace(/^0+(?=\d)/, '');
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const MINUS = 0x2d;
const DIGIT_0 = 0x30;
const DIGIT_9 = 0x39;
const NUMBER_CHAR = /[0-9.eE+-]/;

/** The index just past the string literal that starts at `start`. */
function stringEnd(text: string, start: number): number {
  let index = start + 1;
  while (index < text.length) {
    const char = text.charCodeAt(index);
    if (char === BACKSLASH) index += 2;
    else if (char === QUOTE) return index + 1;
    else index++;
  }
  return index;
}

/** The index just past the number literal that starts at `start`. */
function numberEnd(text: string, start: number): number {
  let index = start + 1;
  while (index < text.length && NUMBER_CHAR.test(text.charAt(index))) index++;
  return index;
}

/**
 * A JSON parser for text `JSON.parse` has accepted, which builds the same value except that
 * inexact numbers become `ExactNumber`s. Objects have no prototype, so a `__proto__` member
 * is an own property, as `JSON.parse` makes it; a repeated member keeps its last value.
 */
class ExactParser {
  private index = 0;
  private depth = 0;

  constructor(private readonly text: string) {}

  value(): unknown {
    this.skipSpace();
    const char = this.text[this.index];
    if (char === '{' || char === '[') return this.nested(char);
    if (char === '"') return this.string();
    if (char === 't') return this.word('true', true);
    if (char === 'f') return this.word('false', false);
    if (char === 'n') return this.word('null', null);
    const end = numberEnd(this.text, this.index);
    const literal = this.text.slice(this.index, end);
    this.index = end;
    const canonical = inexact(literal);
    return canonical === undefined ? Number(literal) : new ExactNumber(canonical);
  }

  private nested(open: '{' | '['): unknown {
    if (++this.depth > MAX_NESTING) {
      throw new UnserializableValueError(
        '',
        `Cannot fingerprint a value nested more than ${MAX_NESTING} levels deep. Send flatter data.`,
      );
    }
    this.index++;
    const result = open === '[' ? this.array() : this.object();
    this.depth--;
    return result;
  }

  private array(): unknown[] {
    const items: unknown[] = [];
    this.skipSpace();
    if (this.text[this.index] === ']') {
      this.index++;
      return items;
    }
    for (;;) {
      items.push(this.value());
      this.skipSpace();
      if (this.text[this.index++] === ']') return items;
    }
  }

  private object(): Record<string, unknown> {
    const members: Record<string, unknown> = Object.create(null);
    this.skipSpace();
    if (this.text[this.index] === '}') {
      this.index++;
      return members;
    }
    for (;;) {
      this.skipSpace();
      const name = this.string();
      this.skipSpace();
      this.index++; // the colon
      members[name] = this.value();
      this.skipSpace();
      if (this.text[this.index++] === '}') return members;
    }
  }

  private string(): string {
    const end = stringEnd(this.text, this.index);
    const literal = this.text.slice(this.index, end);
    this.index = end;
    return JSON.parse(literal) as string;
  }

  private word<T>(word: string, value: T): T {
    this.index += word.length;
    return value;
  }

  private skipSpace(): void {
    while (/[ \t\n\r]/.test(this.text[this.index] ?? '')) this.index++;
  }
}
