/**
 * Where the services are: the machine's own Postgres and NATS, loopback only.
 *
 * `BENCH_DATABASE_URL` or `DATABASE_URL` names the Postgres server; the runs only use it
 * to create (and drop) scratch databases, so they connect to its `postgres` database,
 * whichever database the URL names.
 */
function adminUrl(): string {
  const url = new URL(
    process.env.BENCH_DATABASE_URL ??
      process.env.DATABASE_URL ??
      'postgres://postgres@127.0.0.1:5432/postgres',
  );
  url.pathname = '/postgres';
  return url.toString();
}

export const ADMIN_DATABASE_URL = adminUrl();

export const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

/** An environment variable a child process is started with: its absence is an error naming it. */
export function requiredEnv(name: string): string {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
}

/** postgres-js prints NOTICEs by default; a benchmark wants quiet output. */
export const quiet = { onnotice: () => {} } as const;
