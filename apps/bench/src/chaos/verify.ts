import { isDeepStrictEqual } from 'node:util';
import { taggedJsonSerializer } from '@idem/core';
import type { StoredOutcome } from '@idem/core/store';
import type postgres from 'postgres';
import type { LogicalRequest } from './clients.js';

export interface Verdict {
  /** Logical requests executed more than once. */
  duplicates: number;
  /** Logical requests never executed, or never answered. */
  lost: number;
  /** Answers that differ from the stored outcome (or point at another execution). */
  wrongAnswers: number;
  /** Lease-mode takeovers (a later attempt claimed a key whose holder died or stalled). */
  takeovers: number;
  /** Provider calls deduplicated by the provider (a crash after the charge, before its recovery point was saved). */
  providerRepeats: number;
  /** A few examples of what went wrong. */
  problems: string[];
}

/**
 * The end-of-run check, from the database alone: every logical request executed exactly
 * once (one `chaos_orders` row per business id in transaction mode; one `chaos_charges`
 * row per business id in lease mode), its key is completed, and the answer the client got
 * equals the stored outcome and names that one execution.
 */
export async function verify(
  sql: postgres.Sql,
  requests: readonly LogicalRequest[],
): Promise<Verdict> {
  const executions = new Map<string, { count: number; ids: string[] }>();
  const add = (businessId: string, id: string) => {
    const entry = executions.get(businessId) ?? { count: 0, ids: [] };
    entry.count++;
    entry.ids.push(id);
    executions.set(businessId, entry);
  };
  for (const row of await sql<
    { business_id: string; id: string }[]
  >`select business_id, id::text from chaos_orders`) {
    add(`placeOrder:${row.business_id}`, row.id);
  }
  for (const row of await sql<
    { business_id: string; id: string }[]
  >`select business_id, id::text from chaos_charges`) {
    add(`charge:${row.business_id}`, row.id);
  }
  const stored = new Map<
    string,
    { status: string; outcome: StoredOutcome | null; scope: string }
  >();
  for (const row of await sql<
    { key: string; status: string; outcome: StoredOutcome | null; scope: string }[]
  >`
    select key, status, outcome, scope from idem_keys`) {
    stored.set(`${row.scope}|${row.key}`, row);
  }

  const verdict: Verdict = {
    duplicates: 0,
    lost: 0,
    wrongAnswers: 0,
    takeovers: 0,
    providerRepeats: 0,
    problems: [],
  };
  const problem = (text: string) => {
    if (verdict.problems.length < 10) verdict.problems.push(text);
  };
  for (const request of requests) {
    const execution = executions.get(`${request.procedure}:${request.input.businessId}`);
    const count = execution?.count ?? 0;
    if (count > 1) {
      verdict.duplicates++;
      problem(`${request.key} (${request.procedure}) executed ${count} times`);
    }
    if (count === 0 || request.answer === undefined) {
      verdict.lost++;
      problem(
        `${request.key} (${request.procedure}): ${count} executions, answer ${request.answer === undefined ? `none (${request.error ?? '?'})` : 'received'}`,
      );
      continue;
    }
    const record = stored.get(`tenant:chaos/${request.procedure}|${request.key}`);
    const outcome = record?.outcome;
    const value =
      outcome?.kind === 'success' ? taggedJsonSerializer.deserialize(outcome.value) : undefined;
    const effectId = (request.answer as { effectId?: unknown }).effectId;
    if (
      record?.status !== 'completed' ||
      !isDeepStrictEqual(request.answer, value) ||
      !execution?.ids.includes(String(effectId))
    ) {
      verdict.wrongAnswers++;
      problem(
        `${request.key}: answer ${JSON.stringify(request.answer)} ≠ stored ${JSON.stringify(value ?? record?.status)}`,
      );
    }
  }
  const [takeovers] = await sql<{ n: number }[]>`
    select coalesce(sum(attempts - 1), 0)::int as n from idem_keys where scope = 'tenant:chaos/charge'`;
  verdict.takeovers = takeovers?.n ?? 0;
  const [repeats] = await sql<{ n: number }[]>`
    select (select count(*) from chaos_provider_calls) - (select count(*) from chaos_charges) as n`;
  verdict.providerRepeats = Number(repeats?.n ?? 0);
  return verdict;
}
