/** The chaos switches: client-side network faults and server-side failures. */
export interface Chaos {
  /** Share of replies lost after the server processed the request, 0–100 %. */
  dropRepliesPercent: number;
  /** Share of requests that fail before they are sent, 0–100 %. */
  failBeforeSendPercent: number;
  /** Latency added before every request is sent, in ms. */
  latencyMs: number;
  /** The server dies after the provider charged, before the order exists (once per checkout). */
  crashAfterCharge: boolean;
  /** Pay sends the request twice at once, like an impatient double click. */
  doubleClick: boolean;
  /** The order.paid event is delivered twice to the email consumer. */
  redeliverEvent: boolean;
  /** Seed of the network faults: the same seed gives the same drops. */
  seed: number;
}

export const NO_CHAOS: Chaos = {
  dropRepliesPercent: 0,
  failBeforeSendPercent: 0,
  latencyMs: 0,
  crashAfterCharge: false,
  doubleClick: false,
  redeliverEvent: false,
  seed: 1,
};

/** Query-string names, e.g. `/checkout?drop=50&fail=10&latency=300&crash=1&double=1`. */
export const CHAOS_PARAMS = {
  dropRepliesPercent: 'drop',
  failBeforeSendPercent: 'fail',
  latencyMs: 'latency',
  crashAfterCharge: 'crash',
  doubleClick: 'double',
  redeliverEvent: 'redeliver',
  seed: 'seed',
} as const satisfies Record<keyof Chaos, string>;

export function chaosFromSearch(search: string): Chaos {
  const params = new URLSearchParams(search);
  const number = (name: string, fallback: number, max: number) => {
    const value = Number(params.get(name));
    return params.has(name) && Number.isFinite(value)
      ? Math.min(max, Math.max(0, value))
      : fallback;
  };
  const flag = (name: string) => ['1', 'true', 'on', 'yes'].includes(params.get(name) ?? '');
  return {
    dropRepliesPercent: number(CHAOS_PARAMS.dropRepliesPercent, 0, 100),
    failBeforeSendPercent: number(CHAOS_PARAMS.failBeforeSendPercent, 0, 100),
    latencyMs: number(CHAOS_PARAMS.latencyMs, 0, 10_000),
    crashAfterCharge: flag(CHAOS_PARAMS.crashAfterCharge),
    doubleClick: flag(CHAOS_PARAMS.doubleClick),
    redeliverEvent: flag(CHAOS_PARAMS.redeliverEvent),
    seed: Math.floor(number(CHAOS_PARAMS.seed, 1, 2 ** 31)),
  };
}

/** The query string that reproduces these settings (defaults left out). */
export function chaosToSearch(chaos: Chaos): string {
  const params = new URLSearchParams();
  for (const name of Object.keys(CHAOS_PARAMS) as (keyof Chaos)[]) {
    const value = chaos[name];
    if (value === NO_CHAOS[name]) continue;
    params.set(CHAOS_PARAMS[name], typeof value === 'boolean' ? '1' : String(value));
  }
  const search = params.toString();
  return search ? `?${search}` : '';
}

/** `search` with its chaos parameters replaced by these settings; other parameters stay. */
export function searchWithChaos(search: string, chaos: Chaos): string {
  const params = new URLSearchParams(search);
  for (const name of Object.values(CHAOS_PARAMS)) params.delete(name);
  for (const [name, value] of new URLSearchParams(chaosToSearch(chaos))) params.set(name, value);
  const result = params.toString();
  return result ? `?${result}` : '';
}

/** The switches that are on, in words, for the panel. */
export function describeChaos(chaos: Chaos): string[] {
  const on: string[] = [];
  if (chaos.dropRepliesPercent > 0) on.push(`${chaos.dropRepliesPercent} % of replies dropped`);
  if (chaos.failBeforeSendPercent > 0) {
    on.push(`${chaos.failBeforeSendPercent} % of requests failing before sending`);
  }
  if (chaos.latencyMs > 0) on.push(`${chaos.latencyMs} ms added latency`);
  if (chaos.crashAfterCharge) on.push('crash after charge');
  if (chaos.doubleClick) on.push('double click');
  if (chaos.redeliverEvent) on.push('event redelivered');
  return on;
}
