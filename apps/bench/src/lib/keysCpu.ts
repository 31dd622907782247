import { readFileSync } from 'node:fs';
import { migrate } from '@idem/server/postgres';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { onCleanup } from './cleanup.js';
import { quiet } from './config.js';
import { createScratchDatabase } from './scratchDatabase.js';
import { callsPerSecond } from './workers.js';

/** One timed run of keys: keys per second, and CPU per key of this process and of Postgres. */
export interface KeysCpu {
  perSecond: number;
  /** `<keys>/s node <µs> µs + pg <µs> µs`, aligned for a table of runs. */
  text: string;
}

/**
 * The CPU time, µs, the Postgres backends named `applicationName` have used so far (their
 * `/proc/<pid>/stat` user + system ticks): the server's share of a run, which the rate alone
 * hides on a machine where client and server share the cores.
 */
async function backendsCpuUs(client: postgres.Sql, applicationName: string): Promise<number> {
  const pids =
    await client`select pid from pg_stat_activity where application_name = ${applicationName}`;
  let ticks = 0;
  for (const { pid } of pids) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // A backend that ended.
    }
  }
  return (ticks * 1_000_000) / 100;
}

/**
 * Runs `op` on every id, `concurrency` at a time, on a client whose connections carry
 * `applicationName`: keys per second, and this process's and the Postgres backends' CPU
 * per key.
 */
async function timedKeysCpu(
  client: postgres.Sql,
  applicationName: string,
  concurrency: number,
  ids: readonly string[],
  op: (id: string) => Promise<void>,
): Promise<KeysCpu> {
  const pgBefore = await backendsCpuUs(client, applicationName);
  const cpu = process.cpuUsage();
  const perSecond = await callsPerSecond(concurrency, ids.length, (index) =>
    op(ids[index] as string),
  );
  const used = process.cpuUsage(cpu);
  const pg = (await backendsCpuUs(client, applicationName)) - pgBefore;
  const perKey = (us: number) => ((us / ids.length) | 0).toString().padStart(4);
  const rate = perSecond.toFixed(0).padStart(6);
  return {
    perSecond,
    text: `${rate}/s node ${perKey(used.user + used.system)} µs + pg ${perKey(pg)} µs`,
  };
}

/**
 * A scratch database named after `name`, migrated, with a client of `concurrency`
 * connections whose backends carry `name` as their `application_name`, and `timed`, which
 * runs keys on it as {@link timedKeysCpu} does, counting those backends' CPU. Dropped on exit.
 */
export async function measuredDatabase(name: string, concurrency: number) {
  const scratch = await createScratchDatabase(name);
  const client = postgres(scratch.url, {
    ...quiet,
    max: concurrency,
    connection: { application_name: name },
  });
  onCleanup('close', () => client.end({ timeout: 2 }));
  await migrate(drizzle(client));
  const timed = (ids: readonly string[], op: (id: string) => Promise<void>) =>
    timedKeysCpu(client, name, concurrency, ids, op);
  return { client, timed };
}
