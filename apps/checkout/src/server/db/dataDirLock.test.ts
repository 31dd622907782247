import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { lockDataDir } from './dataDirLock';

const folders: string[] = [];
const dataDir = () => {
  const folder = mkdtempSync(path.join(tmpdir(), 'idem-lock-'));
  folders.push(folder);
  return path.join(folder, 'pglite');
};

afterEach(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

describe('lockDataDir', () => {
  it('takes the lock, writes its PID, and releases it', () => {
    const dir = dataDir();
    const release = lockDataDir(dir);
    expect(JSON.parse(readFileSync(`${dir}.lock`, 'utf8')).pid).toBe(process.pid);
    release();
    expect(existsSync(`${dir}.lock`)).toBe(false);
  });

  it('refuses a folder locked by a live process, naming its PID', async () => {
    const dir = dataDir();
    const other = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)']);
    try {
      writeFileSync(`${dir}.lock`, JSON.stringify({ pid: other.pid, startedAt: 'earlier' }));
      expect(() => lockDataDir(dir)).toThrow(`in use by process ${other.pid}`);
    } finally {
      other.kill();
    }
  });

  it('takes over a stale lock whose process is gone', async () => {
    const dir = dataDir();
    const gone = spawn(process.execPath, ['-e', '']);
    await new Promise((resolve) => gone.once('exit', resolve));
    writeFileSync(`${dir}.lock`, JSON.stringify({ pid: gone.pid, startedAt: 'earlier' }));
    const release = lockDataDir(dir);
    expect(JSON.parse(readFileSync(`${dir}.lock`, 'utf8')).pid).toBe(process.pid);
    release();
  });
});
