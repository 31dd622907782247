import { describe, expect, it } from 'vitest';
import { SIGNATURE_TOLERANCE_SECONDS, signWebhook, verifyWebhook } from './webhookSignature';

const SECRET = 'whsec_test';
const BODY = '{"id":"evt_1","type":"payment.succeeded"}';
const NOW = 1_764_547_200;

describe('webhook signatures', () => {
  it('accepts the provider’s signature of the exact body, within the tolerance', () => {
    const header = signWebhook(BODY, SECRET, NOW);
    expect(header).toMatch(/^t=1764547200,v1=[0-9a-f]{64}$/);
    expect(verifyWebhook(BODY, header, SECRET, NOW)).toBeNull();
    expect(verifyWebhook(BODY, header, SECRET, NOW + SIGNATURE_TOLERANCE_SECONDS)).toBeNull();
  });

  it('refuses a missing, malformed, stale or forged signature, saying which', () => {
    const header = signWebhook(BODY, SECRET, NOW);
    expect(verifyWebhook(BODY, null, SECRET, NOW)).toBe('missing');
    expect(verifyWebhook(BODY, 'v1=abc', SECRET, NOW)).toBe('malformed');
    expect(verifyWebhook(BODY, `t=now,v1=${'a'.repeat(64)}`, SECRET, NOW)).toBe('malformed');
    expect(verifyWebhook(BODY, header, SECRET, NOW + SIGNATURE_TOLERANCE_SECONDS + 1)).toBe(
      'expired',
    );
    expect(verifyWebhook(`${BODY} `, header, SECRET, NOW)).toBe('mismatch');
    expect(verifyWebhook(BODY, header, 'another secret', NOW)).toBe('mismatch');
    expect(verifyWebhook(BODY, signWebhook(BODY, SECRET, NOW - 1), SECRET, NOW)).toBeNull();
    const [timestamp] = header.split(',');
    expect(verifyWebhook(BODY, `${timestamp},v1=${'0'.repeat(64)}`, SECRET, NOW)).toBe('mismatch');
  });
});
