/**
 * The `Retry-After` header value (delay-seconds) for a wait of `retryAfterMs`: whole
 * seconds, rounded up so that a client never comes back early; 0 for no wait.
 */
export function retryAfterSeconds(retryAfterMs: number): number {
  return Math.ceil(Math.max(0, retryAfterMs) / 1000);
}

/**
 * Parses a `Retry-After` header (RFC 9110 §10.2.3) into a delay in milliseconds from
 * `nowMs`, or `undefined` when the value is absent or not valid.
 *
 * - delay-seconds: digits only (`"120"`), surrounding whitespace ignored → seconds × 1000.
 *   A sign, a fraction or a unit (`"-1"`, `"1.5"`, `"5s"`) is not valid.
 * - HTTP-date in any of the three forms a recipient must accept (§5.6.7):
 *   IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`, obsolete RFC 850
 *   `Sunday, 06-Nov-94 08:49:37 GMT` and asctime `Sun Nov  6 08:49:37 1994`
 *   → `max(0, date − nowMs)`, so a date in the past means "retry now".
 *
 * Dates are matched field by field rather than with `Date.parse`, whose leniency differs
 * between engines and accepts strings such as `"123abc"`. The result never exceeds
 * `Number.MAX_SAFE_INTEGER`, however large the header.
 */
export function parseRetryAfter(
  value: string | null | undefined,
  nowMs: number,
): number | undefined {
  if (!Number.isFinite(nowMs)) {
    throw new RangeError(`parseRetryAfter: nowMs must be a finite epoch time; got ${nowMs}.`);
  }
  if (value === null || value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Math.min(Number(text) * 1000, Number.MAX_SAFE_INTEGER);

  const dateMs = parseHttpDate(text, nowMs);
  if (dateMs === undefined) return undefined;
  return Math.min(Math.max(0, dateMs - nowMs), Number.MAX_SAFE_INTEGER);
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const DAY = '(Mon|Tue|Wed|Thu|Fri|Sat|Sun)';
const LONG_DAY = '(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)';
const MONTH = `(${MONTHS.join('|')})`;
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';

// HTTP-date is case-sensitive and has exact spacing (RFC 9110 §5.6.7).
const IMF_FIXDATE = new RegExp(`^${DAY}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`);
const RFC_850 = new RegExp(`^${LONG_DAY}, (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`);
const ASCTIME = new RegExp(`^${DAY} ${MONTH} ( \\d|\\d{2}) ${TIME} (\\d{4})$`);

/** Epoch milliseconds of an HTTP-date, or `undefined` if `text` is not one. */
function parseHttpDate(text: string, nowMs: number): number | undefined {
  let match = IMF_FIXDATE.exec(text);
  if (match) {
    const [, , day, month, year, hour, minute, second] = match;
    return toEpochMs(Number(year), month, Number(day), hour, minute, second);
  }
  match = RFC_850.exec(text);
  if (match) {
    const [, , day, month, year, hour, minute, second] = match;
    return toEpochMs(twoDigitYear(Number(year), nowMs), month, Number(day), hour, minute, second);
  }
  match = ASCTIME.exec(text);
  if (match) {
    const [, , month, day, hour, minute, second, year] = match;
    return toEpochMs(Number(year), month, Number(day), hour, minute, second);
  }
  return undefined;
}

/**
 * RFC 9110 §5.6.7: a two-digit year more than 50 years in the future is the most recent
 * past year with the same last two digits.
 */
function twoDigitYear(yy: number, nowMs: number): number {
  const currentYear = new Date(nowMs).getUTCFullYear();
  let year = currentYear - (currentYear % 100) + yy;
  if (year > currentYear + 50) year -= 100;
  return year;
}

function toEpochMs(
  year: number,
  monthName: string | undefined,
  day: number,
  hourText: string | undefined,
  minuteText: string | undefined,
  secondText: string | undefined,
): number | undefined {
  const month = MONTHS.indexOf(monthName ?? '');
  const hour = Number(hourText);
  const minute = Number(minuteText);
  const second = Number(secondText);
  // 60 is a leap second (RFC 9110 §5.6.7); the Date arithmetic rolls it into the next minute.
  if (month < 0 || hour > 23 || minute > 59 || second > 60) return undefined;
  // setUTCFullYear, not Date.UTC, which would read years 0–99 as 1900–1999.
  const date = new Date(0);
  date.setUTCFullYear(year, month, day);
  // Refuse a day the month does not have (31 Feb) instead of rolling it over.
  if (date.getUTCMonth() !== month || date.getUTCDate() !== day) return undefined;
  date.setUTCHours(hour, minute, second, 0);
  return date.getTime();
}
