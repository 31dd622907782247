import { execFileSync } from 'node:child_process';
import { cpus, loadavg, totalmem } from 'node:os';
import postgres from 'postgres';
import { quiet } from './config.js';

export interface MachineInfo {
  cores: number;
  cpuModel: string;
  memoryGiB: number;
  node: string;
  postgres: string;
  nats: string;
  load: [number, number, number];
}

/** What the numbers were measured on; the load is sampled now (call it before and after). */
export async function machineInfo(databaseUrl: string): Promise<MachineInfo> {
  const sql = postgres(databaseUrl, { ...quiet, max: 1 });
  let version = 'unknown';
  try {
    const [row] = await sql<{ server_version: string }[]>`show server_version`;
    version = row?.server_version ?? version;
  } finally {
    await sql.end({ timeout: 5 });
  }
  return {
    cores: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    node: process.version,
    postgres: version,
    nats: natsVersion(),
    load: loadavg() as [number, number, number],
  };
}

export function currentLoad(): string {
  return loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');
}

function natsVersion(): string {
  try {
    return execFileSync('nats-server', ['--version'], { encoding: 'utf8', timeout: 5_000 }).trim();
  } catch {
    try {
      return execFileSync('/usr/sbin/nats-server', ['--version'], {
        encoding: 'utf8',
        timeout: 5_000,
      }).trim();
    } catch {
      return 'unknown';
    }
  }
}
