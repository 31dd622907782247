import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const run = promisify(execFile);

it('prints the claim, replay, mismatch and takeover walk-through with one charge per order', async () => {
  const cwd = fileURLToPath(new URL('..', import.meta.url));
  const { stdout } = await run('pnpm', ['start'], { cwd, timeout: 150_000 });
  expect(stdout).toMatch(/1\. claim[\s\S]*event claimed \(version 1\)[\s\S]*replayed=false/);
  expect(stdout).toMatch(/2\. replay[\s\S]*event replayed[\s\S]*replayed=true/);
  expect(stdout).toMatch(/3\. mismatch[\s\S]*KEY_MISMATCH/);
  expect(stdout).toMatch(
    /4\. takeover[\s\S]*REQUEST_IN_PROGRESS[\s\S]*event takeover \(version 2\)/,
  );
  expect(stdout).toContain('"chargeId":"ch_2","attempt":2');
  expect(stdout).toContain('Charges made: 2 for 2 orders');
}, 180_000);
