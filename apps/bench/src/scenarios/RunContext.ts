import type postgres from 'postgres';
import type { ResultRow } from '../lib/table.js';

/** What every scenario gets: the run's settings, its scratch database, and where to report. */
export interface RunContext {
  /** `--quick`: a short smoke run that checks every scenario works, not how fast. */
  quick: boolean;
  /** The run's scratch database (migrated). */
  databaseUrl: string;
  /** An admin-side client on the scratch database, for setup and checks. */
  sql: postgres.Sql;
  /** Rows for the one table. */
  report(row: ResultRow): void;
  /** A broken scenario (a duplicate, a lost event, an error answer): the run exits non-zero. */
  fail(message: string): void;
  log(message: string): void;
  /**
   * Extra Node flags for a child process named `name`: with `--profile`, a CPU profile
   * (`--cpu-prof`) written to the run's profile folder when the child exits.
   */
  nodeFlags(name: string): string[];
}

/** "≥ 0.85×"-style targets are only judged in full runs; a quick run says so. */
export function judged<T extends string>(context: RunContext, verdict: T): T | 'info' {
  return context.quick ? 'info' : verdict;
}
