/**
 * `tsx src/tools/explainStore.ts [rows]`: EXPLAIN (ANALYZE, WAL, BUFFERS) of the statements
 * drizzleStore sends — a fresh claim, a claim that finds a completed key (a replay: one
 * read-only statement), the completion, and one sweep batch — on a table of `rows` live and
 * `rows` expired keys. The SQL and parameters are captured from drizzleStore itself through
 * Drizzle's logger. Each EXPLAIN runs in a transaction that is rolled back; whether the
 * statement got a transaction id shows whether its commit would wait for a WAL flush.
 */
import { createHash } from 'node:crypto';
import { leaseTokenOf } from '@idem/core/store';
import { drizzleStore, migrate, sweepExpired } from '@idem/server/postgres';
import type { Logger } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { onCleanup, runMain } from '../lib/cleanup.js';
import { quiet } from '../lib/config.js';
import { required } from '../lib/required.js';
import { createScratchDatabase } from '../lib/scratchDatabase.js';

const SCOPE = 'tenant:explain/orders.create';
const TTL_MS = 86_400_000;

runMain(async () => {
  const rows = Number(process.argv[2] ?? 100_000);
  const scratch = await createScratchDatabase('idem_explain');
  const sql = postgres(scratch.url, { ...quiet, max: 1 });
  onCleanup('close', () => sql.end({ timeout: 2 }));
  await migrate(drizzle(sql));
  for (const [prefix, expires] of [
    ['live-', "now() + interval '1 day'"],
    ['expired-', "now() - interval '1 day'"],
  ] as const) {
    await sql.unsafe(
      `insert into idem_keys (scope, key, fingerprint, status, version, locked_until, attempts,
         outcome, steps, created_at, completed_at, expires_at)
       select $1, $2 || g, md5(g::text), 'completed', 1, null, 1,
         '{"kind":"success","value":{"orderId":1}}'::jsonb, '{}'::jsonb,
         now() - interval '2 days', now() - interval '2 days', ${expires}
       from generate_series(1, $3::int) as g`,
      [SCOPE, prefix, rows],
    );
  }
  await sql.unsafe('vacuum analyze idem_keys');

  const captured: { text: string; params: unknown[] }[] = [];
  const logger: Logger = {
    logQuery: (text, params) => captured.push({ text, params: [...params] }),
  };
  const store = drizzleStore(drizzle(sql, { logger }));
  const request = {
    scope: SCOPE,
    key: 'fresh-key',
    fingerprint: 'f'.repeat(64),
    leaseMs: 30_000,
    ttlMs: TTL_MS,
  };

  const explain = async (title: string, statement: { text: string; params: unknown[] }) => {
    await sql
      .begin(async (tx) => {
        const plan = await tx.unsafe(
          `explain (analyze, wal, buffers, costs off, summary on) ${statement.text}`,
          statement.params as never[],
        );
        const [xid] = await tx`select pg_current_xact_id_if_assigned()::text as xid`;
        console.log(`\n-- ${title}\n${statement.text}`);
        console.log(
          plan
            .map((line) => (line as unknown as { 'QUERY PLAN': string })['QUERY PLAN'])
            .join('\n'),
        );
        console.log(
          xid?.xid
            ? `transaction id assigned (${xid.xid}): its commit waits for a WAL flush`
            : 'no transaction id assigned: a read-only statement, its commit flushes nothing',
        );
        throw new RollbackSignal();
      })
      .catch((error: unknown) => {
        if (!(error instanceof RollbackSignal)) throw error;
      });
  };

  // A completion needs a key in progress: claim two, complete one (capturing its SQL) and
  // EXPLAIN the same statement for the other.
  captured.length = 0;
  const claimed = await store.claim(request);
  if (claimed.status !== 'claimed') throw new Error(claimed.status);
  const claimStatement = required(captured[0], 'the claim statement');
  const other = await store.claim({ ...request, key: 'other-key' });
  if (other.status !== 'claimed') throw new Error(other.status);
  captured.length = 0;
  await store.complete(
    leaseTokenOf(claimed.record),
    { kind: 'success', value: { orderId: 1 } },
    TTL_MS,
  );
  // The incarnation's creation time travels as epoch milliseconds.
  const createdAt = claimed.record.createdAt;
  const otherCreatedAt = other.record.createdAt;
  const completion = required(captured[0], 'the completion statement');
  const completeStatement = {
    text: completion.text,
    params: completion.params.map((param) =>
      param === 'fresh-key' ? 'other-key' : param === createdAt ? otherCreatedAt : param,
    ),
  };

  // A replay: the same payload (fingerprint) as the completed key was stored with.
  captured.length = 0;
  const replay = await store.claim({
    ...request,
    key: 'live-42',
    fingerprint: createHash('md5').update('42').digest('hex'),
  });
  console.log(
    `a claim of a completed key answers "${replay.status}" after ${captured.length} statements`,
  );
  const replayClaim = required(captured[0], 'the claim of the completed key');

  await explain('claim, new key', {
    ...claimStatement,
    params: claimStatement.params.map((param) =>
      param === 'fresh-key' ? 'another-fresh-key' : param,
    ),
  });
  await explain('replay: the claim finds the completed key', replayClaim);
  await explain('completion (fenced UPDATE)', completeStatement);

  captured.length = 0;
  await sweepExpired({ db: drizzle(sql, { logger }), batchSize: 1_000, maxBatches: 1 });
  await explain('one sweep batch (1,000 rows)', required(captured[0], 'the sweep statement'));
  return 0;
});

class RollbackSignal extends Error {}
