// consumeJetStream's flow between the subscription and its workers, without NATS: when a
// worker takes a batch, waits, or exits (pure), and the queue that applies it.
import { describe, expect, it } from 'vitest';
import { batchReady, createFlow, type FlowState, workerStep } from '../src/nats/jetStreamFlow.js';

const pulling: FlowState = { status: 'pulling', partialInFlight: false };

describe('workerStep', () => {
  it('takes whatever has arrived, a lone message too, unless a partial batch is in flight', () => {
    expect(workerStep(pulling, 0, 10)).toBe('wait');
    expect(workerStep(pulling, 1, 10)).toBe('take');
    const partial = { ...pulling, partialInFlight: true };
    expect(workerStep(partial, 3, 10)).toBe('wait');
    expect(workerStep(partial, 10, 10)).toBe('take');
  });

  it('once the subscription ended, takes what is left and then exits', () => {
    const pulled: FlowState = { status: 'pulled', partialInFlight: true };
    expect(batchReady(pulled, 3, 10)).toBe(true);
    expect(workerStep(pulled, 3, 10)).toBe('take');
    expect(workerStep(pulled, 0, 10)).toBe('exit');
  });

  it('exits at a stop, whatever is queued', () => {
    expect(workerStep({ status: 'stopping', partialInFlight: false }, 10, 10)).toBe('exit');
  });
});

describe('createFlow', () => {
  it('groups what arrives during a partial batch into the next one', async () => {
    const flow = createFlow<number>({ maxBatch: 4, maxMessages: 100 });
    expect(flow.push(1)).toBeUndefined();
    const first = await flow.take();
    expect(first).toEqual([1]);
    expect(flow.state().partialInFlight).toBe(true);
    for (const n of [2, 3]) flow.push(n);
    let second: number[] | undefined;
    const taking = flow.take().then((batch) => {
      second = batch;
    });
    await Promise.resolve();
    expect(second).toBeUndefined();
    flow.finished(first ?? []);
    await taking;
    expect(second).toEqual([2, 3]);
  });

  it('holds the puller at maxMessages until a worker takes a batch, and releases it at stop', async () => {
    const flow = createFlow<number>({ maxBatch: 2, maxMessages: 3 });
    flow.push(1);
    flow.push(2);
    const full = flow.push(3);
    expect(full).toBeInstanceOf(Promise);
    expect(await flow.take()).toEqual([1, 2]);
    await full;
    flow.push(4);
    const again = flow.push(5);
    expect(again).toBeInstanceOf(Promise);
    flow.stop();
    await again;
    expect(await flow.take()).toBeUndefined();
    expect(flow.drain()).toEqual([3, 4, 5]);
  });

  it('lets idle workers exit once the subscription ended', async () => {
    const flow = createFlow<number>({ maxBatch: 2, maxMessages: 10 });
    const idle = flow.take();
    flow.pulled();
    expect(await idle).toBeUndefined();
    expect(flow.state().status).toBe('pulled');
    flow.stop();
    flow.pulled();
    expect(flow.state().status).toBe('stopping');
  });
});
