/** What the Redis tools read from a throwaway server. */

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
