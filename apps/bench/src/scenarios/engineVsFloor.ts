import { createHash } from 'node:crypto';
import { createIdempotency } from '@idem/core';
import { canonicalJson } from '@idem/core/store';
import { memoryStore } from '@idem/core/testing';
import { median, perRound } from '../lib/stats.js';
import { formatRate, formatRatio, verdictAtLeast } from '../lib/table.js';
import { judged, type RunContext } from './RunContext.js';

const SCOPE = 'tenant:bench/orders.create';
const INPUT = { path: 'orders.create', input: { sku: 'tea', quantity: 1, ref: 'engine' } };
const RESULT = { orderId: 1, sku: 'tea', quantity: 1 };
const TARGET = 0.5;

/** What a call costs at the least: one sequential call's work, with nothing of idem's. */
function floorCall(records: Map<string, { fingerprint: string; outcome?: string }>) {
  return async (key: string) => {
    const fingerprint = createHash('sha256').update(canonicalJson(INPUT)).digest('hex');
    const id = `${SCOPE}\u0000${key}`;
    if (records.has(id)) throw new Error('floor: key seen twice');
    const record: { fingerprint: string; outcome?: string } = { fingerprint };
    records.set(id, record);
    const value = await handler();
    record.outcome = JSON.stringify(value);
    return value;
  };
}

const handler = async () => RESULT;

/**
 * Engine in memory vs floor: sequential `execute` calls of `createIdempotency` on
 * `memoryStore`, each with a new key, against the work no idempotency engine can avoid for
 * the same call: a Map claim and completion, the canonical JSON and SHA-256 (node:crypto)
 * of the input, and the serialization of the result (`JSON.stringify`). One call at a
 * time, so this is the engine's own CPU per call; rounds are interleaved.
 */
export async function engineVsFloor(context: RunContext): Promise<void> {
  const durationMs = context.quick ? 300 : 2_000;
  const rounds = context.quick ? 1 : 5;
  const rates = { engine: [] as number[], floor: [] as number[] };

  const measure = async (call: (key: string) => Promise<unknown>) => {
    // Warm-up (JIT), then as many calls as fit in the window.
    for (let index = 0; index < 2_000; index++) await call(`warm-${index}`);
    const started = performance.now();
    let calls = 0;
    while (performance.now() - started < durationMs) {
      for (let batch = 0; batch < 100; batch++) await call(`k-${calls++}`);
    }
    return (calls / (performance.now() - started)) * 1000;
  };

  for (let round = 0; round < rounds; round++) {
    context.log(`engine vs floor: round ${round + 1}/${rounds}`);
    rates.floor.push(await measure(floorCall(new Map())));
    const engine = createIdempotency({ store: memoryStore() });
    rates.engine.push(
      await measure(async (key) => {
        const { value } = await engine.execute({ scope: SCOPE, key, input: INPUT }, handler);
        return value;
      }),
    );
  }

  const ratio = median(perRound(rates.engine, rates.floor, (rate, floor) => rate / floor));
  context.report({
    scenario: 'engine in memory (1 caller)',
    variant: 'floor: Map claim + completion, canonical JSON, SHA-256, JSON.stringify',
    result: formatRate(median(rates.floor), 'calls/s'),
    ratio: formatRatio(1),
  });
  context.report({
    scenario: 'engine in memory (1 caller)',
    variant: 'engine in memory vs floor (createIdempotency + memoryStore)',
    result: formatRate(median(rates.engine), 'calls/s'),
    ratio: formatRatio(ratio),
    target: `≥ ${TARGET.toFixed(2)}× floor`,
    verdict: judged(context, verdictAtLeast(ratio, TARGET)),
  });
}
