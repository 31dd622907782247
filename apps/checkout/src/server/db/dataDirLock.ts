import {
  closeSync,
  mkdirSync,
  openSync,
  readFileSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import path from 'node:path';

interface LockOwner {
  pid: number;
  startedAt: string;
}

/**
 * Takes `<dataDir>.lock` for this process: PGlite is one Postgres in one process, and two
 * processes opening the same data folder would corrupt it. A lock whose process is gone
 * (killed, crashed) is stale and taken over. Returns the release function; the lock is
 * also released when the process exits.
 */
export function lockDataDir(dataDir: string): () => void {
  const lockPath = `${dataDir}.lock`;
  mkdirSync(path.dirname(lockPath), { recursive: true });
  for (let round = 0; round < 3; round++) {
    let fd: number;
    try {
      fd = openSync(lockPath, 'wx');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const owner = readOwner(lockPath);
      if (!owner && isFresh(lockPath)) {
        throw new Error(
          `The demo database ${dataDir} is being opened by another process right now (${lockPath} ` +
            'was just created). Stop the other server, or use DEMO_DATA_DIR=<another folder>.',
        );
      }
      if (owner && owner.pid !== process.pid && isAlive(owner.pid)) {
        throw new Error(
          `The demo database ${dataDir} is in use by process ${owner.pid} (since ${owner.startedAt}). ` +
            'PGlite runs inside one process, so two servers cannot share its folder. Stop that ' +
            'process, or start this one with DEMO_DATA_DIR=<another folder>, or with ' +
            `DATABASE_URL=postgres://… to share a real Postgres. If process ${owner.pid} is not ` +
            `this demo, delete ${lockPath}.`,
        );
      }
      // Stale: its process is gone (or it is this very process, from before a reload).
      try {
        unlinkSync(lockPath);
      } catch (unlinkError) {
        if ((unlinkError as NodeJS.ErrnoException).code !== 'ENOENT') throw unlinkError;
      }
      continue;
    }
    const owner: LockOwner = { pid: process.pid, startedAt: new Date().toISOString() };
    writeSync(fd, JSON.stringify(owner));
    closeSync(fd);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      process.off('exit', release);
      // Only our own lock: a stale-lock takeover may have replaced it.
      if (readOwner(lockPath)?.pid === process.pid) {
        try {
          unlinkSync(lockPath);
        } catch {
          // Already gone.
        }
      }
    };
    process.on('exit', release);
    return release;
  }
  throw new Error(`Could not take the lock ${lockPath}: another process keeps re-creating it.`);
}

function readOwner(lockPath: string): LockOwner | undefined {
  try {
    const owner = JSON.parse(readFileSync(lockPath, 'utf8')) as Partial<LockOwner>;
    return typeof owner.pid === 'number'
      ? { pid: owner.pid, startedAt: String(owner.startedAt) }
      : undefined;
  } catch {
    // Unreadable or half-written by a process that died while writing it: stale.
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A lock file without an owner yet may be one that a live process is writing this moment. */
function isFresh(lockPath: string): boolean {
  try {
    return Date.now() - statSync(lockPath).mtimeMs < 5_000;
  } catch {
    return false;
  }
}
