/** What the Redis tools read from a throwaway server, and how they drive a contender. */

/** The part of a node-redis client the readers use. */
interface InfoReader {
  info(section: string): Promise<string>;
}

/** The redis-server's CPU time so far, µs (`INFO cpu`: system and user). */
export async function redisServerCpu(admin: InfoReader): Promise<number> {
  const info = await admin.info('cpu');
  const seconds = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0);
  return (seconds('used_cpu_sys') + seconds('used_cpu_user')) * 1e6;
}

/** Calls `call(0)` … `call(keys - 1)`, `inFlight` at a time; answers calls per second. */
export async function callsPerSecond(
  inFlight: number,
  keys: number,
  call: (index: number) => Promise<void>,
): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      for (let index = next++; index < keys; index = next++) await call(index);
    }),
  );
  return (keys / (performance.now() - started)) * 1000;
}
